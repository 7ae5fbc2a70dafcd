"""ChatBuddy's encrypted local backups (`….enc.zip`, 2026-05-09 to 05-25), the one module that
uses `cryptography`.

Layout: bytes 0-7 `CBENCv01`, 8-23 salt, 24-35 IV, 36-51 GCM tag, 52… ciphertext. The key is
PBKDF2-HMAC-SHA256 of the UTF-8 passphrase (100 000 iterations, 32 bytes); the cipher is
AES-256-GCM without associated data; the plaintext is the backup ZIP. ChatBuddy saved the
passphrase trimmed, so `decrypt` tries it as typed, then trimmed.

A passphrase that does not open the backup, and a backup altered after it was written, look the
same to GCM: both are `WrongPassphrase`.
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

from app.imports.model import InvalidImport, WrongPassphrase

MAGIC = b"CBENCv01"
ITERATIONS = 100_000
_SALT, _IV, _TAG = slice(8, 24), slice(24, 36), slice(36, 52)
_HEADER = 52


def is_encrypted(data: bytes) -> bool:
    """Whether `data` is an encrypted ChatBuddy backup."""
    return data[: len(MAGIC)] == MAGIC


def decrypt(data: bytes, passphrase: str | None) -> bytes:
    """The backup ZIP inside an encrypted backup."""
    if len(data) < _HEADER:
        raise InvalidImport("the encrypted backup is truncated (shorter than its header)")
    if passphrase is None:
        raise WrongPassphrase("this backup is encrypted: give its passphrase")
    sealed = data[_HEADER:] + data[_TAG]
    tried: list[str] = []
    for candidate in (passphrase, passphrase.strip()):
        if candidate in tried:
            continue
        tried.append(candidate)
        try:
            key = _derive(candidate, data[_SALT])
            return AESGCM(key).decrypt(data[_IV], sealed, None)
        except (InvalidTag, UnicodeEncodeError):
            continue
    raise WrongPassphrase("the passphrase does not open this backup (or the backup was altered)")


def encrypt(
    plaintext: bytes, passphrase: str, *, salt: bytes | None = None, iv: bytes | None = None
) -> bytes:
    """An encrypted backup of `plaintext`, as ChatBuddy wrote them (for tests and fixtures)."""
    salt = os.urandom(16) if salt is None else salt
    iv = os.urandom(12) if iv is None else iv
    if len(salt) != 16 or len(iv) != 12:
        raise ValueError("salt must be 16 bytes and iv 12 bytes")
    sealed = AESGCM(_derive(passphrase, salt)).encrypt(iv, plaintext, None)
    return MAGIC + salt + iv + sealed[-16:] + sealed[:-16]


def _derive(passphrase: str, salt: bytes) -> bytes:
    kdf = PBKDF2HMAC(algorithm=SHA256(), length=32, salt=salt, iterations=ITERATIONS)
    return kdf.derive(passphrase.encode())
