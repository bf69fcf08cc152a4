"""Names of files that hold secrets by convention (`.env`, private keys, credential stores).

One rule for every place that could show a file to a model: the planner never sends such a file's
diff, and repository context never quotes one, whether it is in the change or not."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

SECRET_NAME = re.compile(
    r"^(\.env([.\-_].+)?|.+\.env(?!\.(?:py|js|ts|rb|go|sh|java)$)(\.[\w-]+)?"
    r"|\.envrc|\.netrc|_netrc|\.pypirc|\.npmrc|\.git-credentials|\.htpasswd|credentials(\.json)?"
    r"|id_(rsa|dsa|ecdsa|ed25519)(\..*)?|client_secret.*\.json|service[-_]account.*\.json|secrets\.ya?ml"
    r"|.*\.(pem|key|p12|pfx|jks|keystore|kdbx|ppk))$",
    re.IGNORECASE,
)


def is_secret_file(path: str) -> bool:
    return SECRET_NAME.match(PurePosixPath(path).name) is not None
