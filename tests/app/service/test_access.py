"""The keys file: what is refused (naming file:line) and what is only warned about."""

import logging

import pytest

from neardup.app.service.access import Keyring, KeysFileError

READ = "r-0123456789abcdef"
WRITE = "w-0123456789abcdef"


def keys_file(tmp_path, content, mode=0o600):
    path = tmp_path / "keys.txt"
    path.write_bytes(content.encode("utf-8"))
    path.chmod(mode)
    return path


def test_a_private_well_formed_file_is_read_without_warnings(tmp_path, caplog):
    path = keys_file(tmp_path, f"# keys\n\n{READ} read\n{WRITE} write,protect\n")
    with caplog.at_level(logging.WARNING, logger="neardup"):
        keyring = Keyring.from_file(path)
    assert keyring.scopes(READ) == {"read"}
    assert keyring.scopes(WRITE) == {"write", "protect"}
    assert caplog.records == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (f"\ufeff{READ} read\n", r"keys\.txt:1: starts with a byte-order mark"),
        (f"{READ} read\n# again\n{READ} write\n", r"keys\.txt:3: the same key as on line 1"),
        ("short-key-12345 read\n", r"keys\.txt:1: the key has 15 characters; at least 16"),
        (f"{READ} read\nk2 write\n", r"keys\.txt:2: the key has 2 characters"),
    ],
)
def test_a_bom_a_repeated_key_or_a_short_key_is_refused_naming_the_line(tmp_path, content, message):
    with pytest.raises(KeysFileError, match=message):
        Keyring.from_file(keys_file(tmp_path, content))


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620])
def test_a_file_others_may_read_or_write_is_used_with_a_warning(tmp_path, caplog, mode):
    path = keys_file(tmp_path, f"{READ} read\n", mode)
    with caplog.at_level(logging.WARNING, logger="neardup"):
        keyring = Keyring.from_file(path)
    assert keyring.scopes(READ) == {"read"}
    [record] = caplog.records
    assert f"mode {mode:03o}" in record.getMessage() and "chmod 600" in record.getMessage()
