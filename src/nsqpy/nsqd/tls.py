"""nsqd's TLS settings as an ``ssl.SSLContext``.

Python's ``ssl`` cannot ask for a client certificate without verifying it,
so ``--tls-client-auth-policy=require`` (Go: any certificate) verifies it
like ``require-verify``, against ``--tls-root-ca-file`` (or the system CAs).
"""

import ssl

MIN_VERSIONS = {
    "ssl3.0": ssl.TLSVersion.TLSv1,  # SSLv3 is gone from OpenSSL; TLS 1.0 is the floor
    "tls1.0": ssl.TLSVersion.TLSv1,
    "tls1.1": ssl.TLSVersion.TLSv1_1,
    "tls1.2": ssl.TLSVersion.TLSv1_2,
    "tls1.3": ssl.TLSVersion.TLSv1_3,
}
VERSION_NAMES = {"TLSv1": "TLS1.0", "TLSv1.1": "TLS1.1", "TLSv1.2": "TLS1.2", "TLSv1.3": "TLS1.3"}


def server_context(options) -> ssl.SSLContext | None:
    """None without --tls-cert/--tls-key. Raises ValueError naming the bad flag."""
    if not (options.tls_cert and options.tls_key):
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(options.tls_cert, options.tls_key)
    except (OSError, ssl.SSLError) as error:
        raise ValueError(f"--tls-cert/--tls-key: cannot load {options.tls_cert}, {options.tls_key}: {error}") from None
    context.minimum_version = MIN_VERSIONS[options.tls_min_version]
    if options.tls_client_auth_policy:
        context.verify_mode = ssl.CERT_REQUIRED
        try:
            if options.tls_root_ca_file:
                context.load_verify_locations(options.tls_root_ca_file)
            else:
                context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        except (OSError, ssl.SSLError) as error:
            raise ValueError(f"--tls-root-ca-file: cannot load {options.tls_root_ca_file}: {error}") from None
    return context


def peer_context(options) -> ssl.SSLContext | None:
    """How a replicated nsqd reaches peers that require TLS (None: they
    do not). Peers are one cluster with one configuration: the cluster's
    CA (--tls-root-ca-file, or the system's) vouches for a peer, and this
    node's own certificate answers a peer that asks for one
    (--tls-client-auth-policy), so it needs both server and client use.
    A peer is dialled at the address it registered in etcd, which its
    certificate need not name: the CA is the check, not the host name."""
    if options.tls_required == "false":
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.minimum_version = MIN_VERSIONS[options.tls_min_version]
    try:
        if options.tls_root_ca_file:
            context.load_verify_locations(options.tls_root_ca_file)
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        context.load_cert_chain(options.tls_cert, options.tls_key)
    except (OSError, ssl.SSLError) as error:
        raise ValueError(f"replication over TLS: cannot load --tls-root-ca-file/--tls-cert: {error}") from None
    return context


def connection_info(transport) -> dict:
    """The TLS fields of a client's /stats entry."""
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return {}
    cipher = ssl_object.cipher()
    return {
        "tls": True,
        "tls_cipher_suite": cipher[0] if cipher else "",
        "tls_version": VERSION_NAMES.get(ssl_object.version(), ssl_object.version() or ""),
        "tls_negotiated_protocol": ssl_object.selected_alpn_protocol() or "",
        "tls_negotiated_protocol_is_mutual": ssl_object.selected_alpn_protocol() is not None,
    }
