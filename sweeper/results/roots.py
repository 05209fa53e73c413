"""Where a results root may be: the one rule for `--results`, a sweep file's `results:` and
the Python API (`check_results_root`). Below every other module of `sweeper.results` but its
errors, so that the store, the locations and the command line all use it."""

from __future__ import annotations

import re

from sweeper.results.errors import ResultsInputError, shown

# Where a results root may be (docs/data-model.md, "Results roots"): places that outlive the
# process. memory:// is the Python API's in-process store (tests, a notebook's scratch); mock://
# is pyarrow's test filesystem: neither keeps anything once the process ends.
PERSISTENT_SCHEMES = ("file", "s3", "gs", "gcs", "hdfs", "viewfs", "abfs", "abfss")
IN_PROCESS_SCHEMES = ("memory", "mock")
SECRET_QUERY_KEYS = ("access_key", "secret_key", "session_token", "credential",
                     "access_token", "credentials", "client_secret", "account_key",
                     "sas_token", "password")


def check_results_root(root: object, where: str = "--results", *,
                       in_process: bool = False) -> str:
    """`root` if a results root may be there, else one line naming `where`: not empty, a
    scheme that keeps what is stored (`in_process`: memory:// too, for the Python API), and no
    credentials in it (userinfo, or pyarrow's access_key/secret_key query options): those come
    from the environment only, and the refusal never prints them."""
    allowed = ("a local path or a URI such as s3://bucket/prefix (schemes: "
               + ", ".join(f"{s}://" for s in PERSISTENT_SCHEMES) + "; docs/data-model.md)")
    if not isinstance(root, str) or not root.strip():
        raise ResultsInputError(f"{where}: got {shown(root)}; allowed: {allowed}")
    if "://" not in root:
        return root
    scheme, rest = root.split("://", 1)
    scheme = scheme.lower()
    if scheme not in PERSISTENT_SCHEMES and not (in_process and scheme == "memory"):
        why = ("keeps nothing once this process ends" if scheme in IN_PROCESS_SCHEMES
               else "is not a filesystem sweeper knows")
        named = scheme if re.fullmatch(r"[a-z][a-z0-9+.-]{0,15}", scheme) else shown(scheme)
        raise ResultsInputError(f"{where}: got a {named}:// root, which {why}; "
                                f"allowed: {allowed}")
    from urllib.parse import unquote

    before_query, _, query = rest.partition("?")
    before_query = before_query.split("#", 1)[0]
    authority = before_query.split("/", 1)[0]
    # userinfo with a password (KEY:SECRET@..., a secret may hold '/'), or any userinfo on an
    # object store (a bucket has no '@'); hdfs://user@namenode and abfs://container@account
    # name no secret
    secret_userinfo = re.match(r"[^@]*:[^@]*@", before_query) is not None or (
        scheme in ("s3", "gs", "gcs") and "@" in authority)
    keys = {unquote(part.split("=", 1)[0]).lower() for part in query.split("&") if part}
    if secret_userinfo or keys & set(SECRET_QUERY_KEYS):
        raise ResultsInputError(
            f"{where}: got a URI with credentials in it (not shown); allowed: "
            f"{scheme}://bucket/prefix, the credentials in the environment (AWS_ACCESS_KEY_ID "
            "and AWS_SECRET_ACCESS_KEY for s3://; docs/data-model.md)")
    return root
