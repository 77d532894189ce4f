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


@pytest.mark.parametrize(
    "line",
    [READ, f"{READ} read extra", f"{READ} admin", f"{READ} read,admin", f"{READ} read,"],
)
def test_a_line_without_exactly_one_known_scope_list_is_refused_naming_the_scopes(tmp_path, line):
    with pytest.raises(KeysFileError) as caught:
        Keyring.from_file(keys_file(tmp_path, f"# keys\n{line}\n"))
    assert str(caught.value) == (
        f"{tmp_path / 'keys.txt'}:2: expected 'KEY SCOPE[,SCOPE...]' with scopes from "
        "protect, read, write"
    )


def test_a_key_of_min_key_chars_with_every_scope_is_accepted_and_an_unknown_key_has_none(tmp_path):
    key = "k" * 16
    keyring = Keyring.from_file(keys_file(tmp_path, f"{key} read,write,protect\n"))
    assert keyring.scopes(key) == {"read", "write", "protect"}
    assert keyring.scopes("k" * 17) is None


def test_the_messages_of_a_refused_file_say_what_to_do(tmp_path):
    path = tmp_path / "keys.txt"
    with pytest.raises(KeysFileError, match=r"keys\.txt: cannot read the keys file: "):
        Keyring.from_file(path)
    with pytest.raises(KeysFileError, match=r"keys\.txt: the keys file has no keys$"):
        Keyring.from_file(keys_file(tmp_path, "# none yet\n\n"))
    messages = {
        f"\ufeff{READ} read\n": "save the file as UTF-8 without a BOM",
        f"{READ} read\n{READ} write\n": "give each key once, with all its scopes",
        "short read\n": "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(24))')",
    }
    for content, advice in messages.items():
        with pytest.raises(KeysFileError) as caught:
            Keyring.from_file(keys_file(tmp_path, content))
        assert str(caught.value).endswith(advice)


def test_only_read_or_write_bits_of_group_or_others_warn_naming_the_file(tmp_path, caplog):
    path = keys_file(tmp_path, f"{READ} read\n", 0o711)  # others may only execute it
    with caplog.at_level(logging.WARNING, logger="neardup"):
        Keyring.from_file(path)
    assert caplog.records == []
    path.chmod(0o660)
    with caplog.at_level(logging.WARNING, logger="neardup"):
        Keyring.from_file(path)
    [record] = caplog.records
    assert record.getMessage() == (
        f"{path}: the keys file can be read or written by group or others (mode 660): chmod 600 it"
    )
