"""Core errors about the served index map to statuses in one place (app/api/errors.py): the
index's state is the server's, never the request's, and its URL may hold credentials."""

import pytest

from neardup.app.api.errors import status_for
from neardup.core.engine import IndexDamagedError, IndexLayoutError, SignatureError


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (IndexLayoutError("s3://key:secret@bucket/idx", "p00000001-0123456789ab"), 500),
        (IndexDamagedError("s3://key:secret@bucket/idx", "parts/x/ids-00000.arrow", "is"), 500),
        (SignatureError("a request's"), 422),
    ],
)
def test_index_errors_are_the_servers_never_the_requests(error, status) -> None:
    assert status_for(error) == status
