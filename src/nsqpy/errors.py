"""Errors shared by every daemon."""


class StartupError(Exception):
    """A daemon cannot start; the message is one line naming the cause and the fix."""
