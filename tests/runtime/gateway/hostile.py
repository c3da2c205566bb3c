"""How servers behind a proxy have read a request path, to hold the gateway's forwarded
paths against all of them at once, and the fragments of known proxy bypasses that the
hostile-path tests compose.

readings(path) is every path a server could act on, given the path as received: the
closure of the path under each normalisation some server applies (in any order, any
number of times): decoding `%XX` (again), IIS's `%uXXXX`, Tomcat's and Spring's cutting
of `;parameters` from each segment, Windows's `\\` for `/` and its dropping of trailing
dots and spaces, NFKC folding (fullwidth `．` to `.`), merging `//`, and RFC 3986's
removal of dot segments. A forwarded path is safe when all of its readings lie under the
prefix the grant named."""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import unquote

# Pieces of published proxy and path-normalisation bypasses (Orange Tsai's "Breaking
# Parser Logic", the Tomcat and Spring `..;/` family, double and overlong encodings,
# IIS's %u, Windows's trailing dots and backslashes, NFKC lookalikes), as raw request
# bytes: the tests send them as they are, no client re-encoding them.
FRAGMENTS = [
    b"..",
    b".",
    b"...",
    b"%2e",
    b"%2E",
    b"%252e",
    b"%25252e",
    b"/",
    b"//",
    b"%2f",
    b"%2F",
    b"%252f",
    b"\\",
    b"%5c",
    b"%255c",
    b";",
    b"%3b",
    b";jsessionid=1",
    b"%00",
    b"%0a",
    b"%0d%0a",
    b"%09",
    b"%c0%ae",
    b"%c0%af",
    b"%e0%80%ae",
    b"%c1%9c",
    b"%ef%bc%8e",
    b"%ef%bc%8f",
    b"%e2%80%a4",
    b"%u002e",
    b"%3f",
    b"%23",
    b"#",
    b"%20",
    b"::$DATA",
    b"%%32%65",
    b"%",
    b"%ff",
    b"\xc3\xa9",
    b"write",
    b"x",
    b"~",
    b"-",
    b".json",
]

# Fragments that pass on their own, drawn more often so that a fair share of the
# compositions is admitted: the property the tests hold is about what gets through.
QUIET = [b"x", b"write", b"-", b"~", b".json", b"%2f", b"/", b"%20", b"\xc3\xa9", b"::$DATA", b".", b"..", b"%2e"]
MIXED = FRAGMENTS + QUIET * 3

_U = re.compile(r"%u([0-9a-fA-F]{4})")


def _decode(path: str) -> str:
    return unquote(path, errors="replace")


def _iis_u(path: str) -> str:
    return _U.sub(lambda m: chr(int(m.group(1), 16)), path)


def _cut_parameters(path: str) -> str:
    return "/".join(segment.split(";", 1)[0] for segment in path.split("/"))


def _backslashes(path: str) -> str:
    return path.replace("\\", "/")


def _trim_trailing(path: str) -> str:
    """Windows drops a name's trailing dots and spaces; a segment of dots (and spaces)
    is read, at worst, as `..` (or `.` for one dot)."""

    def trimmed(segment: str) -> str:
        if segment.strip(". "):
            return segment.rstrip(". ")
        dots = segment.count(".")
        return ".." if dots >= 2 else "." if dots else segment

    return "/".join(trimmed(segment) for segment in path.split("/"))


def _nfkc(path: str) -> str:
    return unicodedata.normalize("NFKC", path)


def _merge(path: str) -> str:
    return re.sub(r"/{2,}", "/", path)


def _cut_at_delimiters(path: str) -> str:
    return re.split(r"[?#\x00]", path, maxsplit=1)[0]


def remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4, on an absolute path."""
    out: list[str] = []
    segments = path.split("/")[1:]
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == ".":
            if last:
                out.append("")
        elif segment == "..":
            if out:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(segment)
    return "/" + "/".join(out)


NORMALISATIONS = (
    _decode,
    _iis_u,
    _cut_parameters,
    _backslashes,
    _trim_trailing,
    _nfkc,
    _merge,
    _cut_at_delimiters,
    remove_dot_segments,
)


def readings(target: str, *, bound: int = 2000) -> set[str]:
    """Every path a server could act on, given `target` (a request target: the query,
    if any, is cut off first, as every server does)."""
    start = target.split("?", 1)[0]
    seen = {start}
    frontier = [start]
    while frontier and len(seen) < bound:
        path = frontier.pop()
        for normalise in NORMALISATIONS:
            read = normalise(path)
            if read not in seen:
                seen.add(read)
                frontier.append(read)
    return seen


def outside(target: str, prefix: str) -> list[str]:
    """The readings of `target` that do not lie under `prefix` (which ends with `/`)."""
    return sorted(r for r in readings(target) if not r.startswith(prefix))


# The grant the hostile-path tests give: tool.call on tool:echo/read/* only.
GRANTED = "tool:echo/read/*"
UNDER = "/tool/read/"  # ... and where the fake tool's paths must then all lie

# (what it is, the request target below /gateway/tools/echo/ as raw bytes, the outcome):
# a PathRefusal's value (400 TOOL_PATH_REFUSED with that reason, nothing forwarded and
# nothing written), "denied" (403 AUTHORITY_DENIED: decided on and recorded, not
# forwarded), or the path the fake tool then receives.
HOSTILE = [
    # The three of issue 17, forwarded verbatim before the fix.
    ("tomcat ..;/", b"read/..;/write/x", "parameter"),
    ("double-encoded dots", b"read/%252e%252e/write/x", "encoded"),
    ("double-encoded slashes", b"read/x/..%252f..%252fwrite/x", "encoded"),
    # Dot segments, plain and encoded once (the server decodes those).
    ("plain ..", b"read/../write/x", "dot_segment"),
    ("encoded ..", b"read/%2e%2e/write/x", "dot_segment"),
    ("upper-case encoded ..", b"read/%2E%2E/write/x", "dot_segment"),
    ("half-encoded ..", b"read/.%2e/write/x", "dot_segment"),
    ("other half", b"read/%2e./write/x", "dot_segment"),
    ("single dot", b"read/./x", "dot_segment"),
    ("trailing dot segment", b"read/x/.", "dot_segment"),
    ("encoded slash after ..", b"read/..%2fwrite/x", "dot_segment"),
    ("three dots", b"read/.../write/x", "dot_segment"),
    ("four dots", b"read/x/..../write", "dot_segment"),
    ("dots and a space (windows trims it)", b"read/..%20/write/x", "dot_segment"),
    ("ntfs stream after ..", b"read/..::$DATA/write/x", "dot_segment"),
    ("dots first", b"%2e%2e/write/x", "dot_segment"),
    # Encoded more than once, or a literal percent.
    ("triple-encoded dots", b"read/%25252e%25252e/write/x", "encoded"),
    ("nested encoding %%32%65", b"read/%%32%65%%32%65/write/x", "encoded"),
    ("double-encoded backslash", b"read/..%255cwrite/x", "encoded"),
    ("iis %u dots", b"read/%u002e%u002e/write/x", "encoded"),
    ("literal percent", b"read/100%25", "encoded"),
    # Overlong and invalid UTF-8.
    ("overlong dots", b"read/%c0%ae%c0%ae/write/x", "bad_utf8"),
    ("overlong slash", b"read/..%c0%afwrite/x", "bad_utf8"),
    ("three-byte overlong dot", b"read/%e0%80%ae%e0%80%ae/write/x", "bad_utf8"),
    ("overlong backslash", b"read/..%c1%9cwrite/x", "bad_utf8"),
    ("utf-16 surrogate", b"read/%ed%a0%80", "bad_utf8"),
    ("stray byte", b"read/%ff", "bad_utf8"),
    ("raw invalid byte", b"read/\xff", "bad_utf8"),
    # NUL and control characters.
    ("nul then ..", b"read/%00/../write/x", "control"),
    ("nul extension cut", b"read/x%00.json", "control"),
    ("crlf header injection", b"read/x%0d%0aX-Injected:%201", "control"),
    ("tab", b"read/%09/x", "control"),
    ("del", b"read/x%7f", "control"),
    ("c1 next-line", b"read/x%c2%85", "control"),
    # Separators and delimiters some server reads differently.
    ("encoded backslash", b"read/..%5cwrite/x", "backslash"),
    ("raw backslashes", b"read\\..\\write\\x", "backslash"),
    ("encoded ;", b"read/%3b/../write/x", "parameter"),
    ("session id parameter", b"read;jsessionid=1/../write/x", "parameter"),
    ("encoded ? then ..", b"read/x%3f/../../write/x", "delimiter"),
    ("encoded # then ..", b"read/x%23/../../write/x", "delimiter"),
    ("raw #", b"read/x#/../../write/x", "delimiter"),
    # Empty segments.
    ("double slash", b"read//x", "empty_segment"),
    ("leading slash", b"/read/x", "empty_segment"),
    ("host-like //", b"read/%2f%2fevil.example/x", "empty_segment"),
    # Unicode lookalikes and invisibles.
    ("fullwidth dots", b"read/%ef%bc%8e%ef%bc%8e/write/x", "unicode"),
    ("fullwidth solidus", b"read/..%ef%bc%8fwrite/x", "unicode"),
    ("one-dot leaders", b"read/%e2%80%a4%e2%80%a4/write/x", "unicode"),
    ("small full stops", b"read/%ef%b9%92%ef%b9%92/write/x", "unicode"),
    ("right-to-left override", b"read/%e2%80%aex", "unicode"),
    ("zero-width space", b"read/x%e2%80%8b", "unicode"),
    ("decomposed accent", b"read/cafe%cc%81", "unicode"),
    # Length, and the query.
    ("very long", b"read/" + b"a" * 500, "too_long"),
    ("raw byte in the query", b"read/x?q=\xff", "query"),
    # What is allowed, and where it goes.
    ("outside the grant", b"write/x", "denied"),
    ("another case", b"READ/x", "denied"),
    ("plain", b"read/x", "/tool/read/x"),
    ("encoded once", b"read/caf%c3%a9", "/tool/read/caf%C3%A9"),
    ("raw utf-8", b"read/caf\xc3\xa9", "/tool/read/caf%C3%A9"),
    ("space", b"read/a%20b", "/tool/read/a%20b"),
    ("trailing slash", b"read/x/", "/tool/read/x/"),
    ("trailing dot in a name", b"read/x.", "/tool/read/x."),
    ("encoded slash is a separator", b"read%2fx", "/tool/read/x"),
    ("dots in the query only", b"read/x?y=../../write/x", "/tool/read/x?y=../../write/x"),
]
