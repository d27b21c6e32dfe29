"""Command lines the way NSQ's Go programs read them.

Every option takes ``-name v``, ``--name v``, ``-name=v`` and ``--name=v``;
booleans may stand bare (``--snappy``) or take a value (``--snappy=false``);
list options repeat (``--lookupd-tcp-address a --lookupd-tcp-address b``).
A ``--config`` TOML file supplies the same options under their config keys;
the command line wins over the file, the file over the defaults.
"""

import argparse
import dataclasses
import json
import re

from ..options import INT64_MAX, INT64_MIN, OptionSpec, format_duration, option_specs, parse_duration, parse_int


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "t", "true"):
        return True
    if value in ("0", "f", "false"):
        return False
    raise ValueError(f"invalid boolean {text!r} (use true or false)")


def parse_int64(text: str) -> int:
    """An integer flag: decimal, in int64 (Go's flag package refuses more,
    and every consumer of a setting, nsqd.dat or /stats, assumes int64)."""
    return parse_int(text, INT64_MIN, INT64_MAX)


def _converter(spec: OptionSpec):
    kind = spec.item_kind if spec.kind is list else spec.kind
    if spec.duration:
        return parse_duration
    if kind is bool:
        return parse_bool
    if kind is int:
        return parse_int64
    return kind


def _typed(convert, name: str):
    """argparse reports ValueError as 'invalid value'; keep our reason instead
    (argparse puts the flag's name before it)."""
    def parse(text):
        try:
            return convert(text)
        except ValueError as error:
            detail = str(error) if convert not in (int, float) else f"{text!r} is not a number"
            raise argparse.ArgumentTypeError(detail) from None
    parse.__name__ = name
    return parse


_NOTE = "(default "
_NOTE_KEPT = "(default\0"  # no whitespace: the wrapper keeps it whole


def go_value(value, duration: bool = False) -> str:
    """A value as Go's flag package prints it: ``30s``, ``"text"``, ``1``, ``true``."""
    if duration:
        return format_duration(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float):
        return repr(value).removesuffix(".0")
    if isinstance(value, (list, tuple)):
        return ",".join(item if isinstance(item, str) else go_value(item) for item in value)
    return str(value)


def default_note(value, duration: bool = False) -> str:
    """`` (default 30s)`` for the end of a flag's help, or nothing for a zero
    value (empty, false, 0, none): the note NSQ's ``--help`` shows, so an
    operator reading ours sees the same defaults in the same shape."""
    if value is argparse.SUPPRESS or not value:
        return ""
    return f" {_NOTE}{go_value(value, duration)})"


class GoDefaultsFormatter(argparse.HelpFormatter):
    """Each flag's help ends with its default in Go's shape, for parsers
    whose actions carry their defaults (nsq_to_parquet's, nsqpy's).
    ``build_parser``'s suppress theirs (a flag not given must stay unset, for
    ``--config`` to fill), so it writes the note into the help itself."""

    def _get_help_string(self, action) -> str:
        note = default_note(action.default) if action.option_strings else ""
        return (action.help or "") + note.replace("%", "%%")

    def _split_lines(self, text: str, width: int) -> list[str]:
        """Wrapped, but never between ``(default`` and its value."""
        lines = super()._split_lines(text.replace(_NOTE, _NOTE_KEPT), width)
        return [line.replace(_NOTE_KEPT, _NOTE) for line in lines]


_BOTH_SPELLINGS = re.compile(r"^argument -([^\s/]+)/--\1: ")  # how argparse names a flag of ours


class OneLineErrorParser(argparse.ArgumentParser):
    """A bad flag is reported in one line, the last a person sees: the usage
    of a program with fifty flags would bury it (``--help`` shows them)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", GoDefaultsFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        """``argument -mem-queue-size/--mem-queue-size: ...`` becomes
        ``--mem-queue-size: ...``: a flag named once, as its help shows it."""
        message = _BOTH_SPELLINGS.sub(r"--\1: ", message)
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def option_defaults(options_class) -> dict:
    """Each option's default value, factories called: nsqd's node id and
    hostname are shown computed, as Go shows them."""
    return {field.name: field.default_factory() if field.default is dataclasses.MISSING else field.default
            for field in dataclasses.fields(options_class) if "help" in field.metadata}


def flag_help(spec: OptionSpec, default) -> str:
    """The help as argparse prints it: NSQ's text, a literal ``%`` kept (it
    is argparse's format character), and the default's note."""
    return (spec.help + default_note(default, spec.duration)).replace("%", "%%")


def build_parser(program: str, options_class) -> argparse.ArgumentParser:
    defaults = option_defaults(options_class)
    parser = OneLineErrorParser(prog=program, allow_abbrev=False, add_help=False, argument_default=argparse.SUPPRESS)
    parser.add_argument("-h", "-help", "--help", action="help", help="show this help and exit")
    parser.add_argument("-version", "--version", action="store_true", help="print version string")
    parser.add_argument("-config", "--config", metavar="FILE", help="path to config file")
    for spec in option_specs(options_class):
        names = [f"-{spec.flag}", f"--{spec.flag}"]
        convert = _typed(_converter(spec), spec.flag)
        kwargs = {"dest": spec.field, "help": flag_help(spec, defaults.get(spec.field))}
        if spec.kind is bool:
            parser.add_argument(*names, nargs="?", const=True, type=convert, metavar="BOOL", **kwargs)
        elif spec.kind is list:
            if spec.item_kind is float:
                # NSQ also accepts a comma separated list for float lists
                convert = _typed(lambda text: [float(x) for x in text.split(",") if x], spec.flag)
                parser.add_argument(*names, action="extend", type=convert, **kwargs)
            else:
                parser.add_argument(*names, action="append", type=convert, **kwargs)
        else:
            parser.add_argument(*names, type=convert, **kwargs)
    return parser


def _from_config_value(spec: OptionSpec, value):
    """Config files hold TOML values; durations may be Go strings or integer
    ms; both, and integers, within the ranges the same flag has."""
    if spec.duration:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return parse_duration(f"{value}ms")
        return parse_duration(str(value))
    if spec.kind is list:
        items = value if isinstance(value, list) else [value]
        return [spec.item_kind(v) for v in items]
    if spec.kind is bool and isinstance(value, str):
        return parse_bool(value)
    if spec.kind is float and isinstance(value, int):
        return float(value)
    if not isinstance(value, spec.kind) or isinstance(value, bool) is not (spec.kind is bool):
        raise ValueError(f"{value!r} is not a {spec.kind.__name__}")
    return parse_int64(str(value)) if spec.kind is int else value


def load_config(path: str, options_class) -> dict:
    import tomllib  # only a --config file needs it

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as error:
        raise ValueError(f"--config {path}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"--config {path}: invalid TOML: {error}") from None
    by_cfg = {spec.cfg: spec for spec in option_specs(options_class)}
    values = {}
    for key, value in data.items():
        spec = by_cfg.get(key)
        if spec is None:
            continue  # NSQ ignores keys it does not know
        try:
            values[spec.field] = _from_config_value(spec, value)
        except (ValueError, TypeError) as error:
            raise ValueError(f"--config {path}: {key}: {error}") from None
    return values


def parse_options(program: str, options_class, argv: list[str]):
    """-> (options, show_version). Raises SystemExit with a usage line on error."""
    parser = build_parser(program, options_class)
    args = vars(parser.parse_args(argv))
    show_version = args.pop("version", False)
    values = {}
    config = args.pop("config", None)
    if config:
        try:
            values.update(load_config(config, options_class))
        except ValueError as error:
            parser.exit(2, f"{program}: {error}\n")
    specs = {spec.field: spec for spec in option_specs(options_class)}
    for field, value in args.items():
        if specs[field].choices and value not in specs[field].choices:
            parser.exit(2, f"{program}: --{specs[field].flag}: {value!r} is not one of "
                           f"{', '.join(specs[field].choices)}\n")
        values[field] = value
    return options_class(**values), show_version
