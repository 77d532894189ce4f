"""A small real-looking corpus: license files of Debian and Python packages.

MIT texts that differ only in their copyright line are near duplicates (Jaccard about 0.9);
two packages ship the very same file (exact copies); BSD and Apache texts stand alone.

``python -m tests.app.cli.licenses [DIR]`` writes README.md's worked example there:
``licenses.jsonl`` and ``eval.jsonl`` (default: the current directory).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MIT = (
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this "
    'software and associated documentation files (the "Software"), to deal in the Software '
    "without restriction, including without limitation the rights to use, copy, modify, merge, "
    "publish, distribute, sublicense, and/or sell copies of the Software, and to permit persons "
    "to whom the Software is furnished to do so, subject to the following conditions: The above "
    "copyright notice and this permission notice shall be included in all copies or substantial "
    'portions of the Software. THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, '
    "EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS "
    "FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT "
    "HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF "
    "CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE "
    "USE OR OTHER DEALINGS IN THE SOFTWARE."
)
BSD = (
    "Redistribution and use in source and binary forms, with or without modification, are "
    "permitted provided that the following conditions are met: Redistributions of source code "
    "must retain the above copyright notice, this list of conditions and the following "
    "disclaimer. Redistributions in binary form must reproduce the above copyright notice, this "
    "list of conditions and the following disclaimer in the documentation and/or other materials "
    "provided with the distribution. Neither the name of the copyright holder nor the names of "
    "its contributors may be used to endorse or promote products derived from this software "
    "without specific prior written permission."
)
APACHE = (
    'Licensed under the Apache License, Version 2.0 (the "License"); you may not use this file '
    "except in compliance with the License. You may obtain a copy of the License at the Apache "
    "web site. Unless required by applicable law or agreed to in writing, software distributed "
    'under the License is distributed on an "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF '
    "ANY KIND, either express or implied. See the License for the specific language governing "
    "permissions and limitations under the License."
)
#: A protected eval item (a reading-comprehension passage) that one scraped page quotes.
EVAL_PASSAGE = "Tom found a shiny red shell by the river and carried it home to show his sister."


def mit(holder: str) -> str:
    """The MIT license with its copyright line."""
    return f"Copyright (c) {holder}. {MIT}"


def license_rows() -> list[dict]:
    """Rows of a license corpus, ids like ``deb/libfontenc1``; ``quality`` and ``meta`` ride
    along to show they pass through."""
    return [
        {"id": "deb/libfontenc1", "text": mit("1998 The Open Group"), "quality": 0.4,
         "meta": {"source": "debian", "size": 1071}},
        {"id": "deb/libxau6", "text": mit("1988, 1993 The Open Group"), "quality": 0.9,
         "meta": {"source": "debian", "size": 1082}},
        {"id": "py/pip-26.3.dist-info/LICENSE.txt", "text": mit("2008-present The pip developers"),
         "quality": 0.7, "meta": {"source": "pypi", "size": 1093}},
        {"id": "py/six-1.16.0.dist-info/LICENSE", "text": mit("2010-2020 Benjamin Peterson"),
         "quality": 0.5, "meta": {"source": "pypi", "size": 1066}},
        {"id": "deb/libbsd0", "text": "Copyright (c) The Regents. " + BSD, "quality": 0.8,
         "meta": {"source": "debian", "size": 1467}},
        {"id": "deb/libedit2", "text": "Copyright (c) The Regents. " + BSD, "quality": 0.3,
         "meta": {"source": "debian", "size": 1467}},
        {"id": "py/requests-2.32.dist-info/LICENSE", "text": APACHE, "quality": 0.6,
         "meta": {"source": "pypi", "size": 10142}},
        {"id": "web/blog-post-17", "text": "As the story goes, " + EVAL_PASSAGE + " The end.",
         "quality": 0.2, "meta": {"source": "web", "size": 120}},
    ]  # fmt: skip


def eval_rows() -> list[dict]:
    """The protected eval set of the worked example: one item, the passage a page quotes."""
    return [{"id": "story-3", "question": EVAL_PASSAGE}]


def write_example(directory: Path) -> list[Path]:
    """Write ``licenses.jsonl`` and ``eval.jsonl`` into ``directory``; their paths."""
    written = []
    for name, rows in (("licenses.jsonl", license_rows()), ("eval.jsonl", eval_rows())):
        path = directory / name
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_example(Path(sys.argv[1] if len(sys.argv) > 1 else ".")):
        print(path)
