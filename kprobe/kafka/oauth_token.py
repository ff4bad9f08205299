"""What every OAUTHBEARER token source gives: a `Token` to send, or a `TokenError` saying why there is none."""

from __future__ import annotations

from kprobe.records import field, record


@record
class Token:
    """A token to send: its value never in repr; `expires_at` is wall-clock seconds."""

    value: str = field(repr=False)
    principal: str
    expires_at: float
    extensions: tuple[tuple[str, str], ...] = ()
    # What the token is, for a refusal to say (an MSK IAM token: its region and whose credentials).
    about: str = ""


class TokenError(Exception):
    """No token: the message names the endpoint (without credentials) and what it answered, never a secret.

    `deadline` says the run's own deadline cut the request short, which proves nothing about the
    endpoint.
    """

    def __init__(self, message: str, *, deadline: bool = False) -> None:
        super().__init__(message)
        self.deadline = deadline
