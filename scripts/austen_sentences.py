#!/usr/bin/python3
"""Jane Austen's six novels as one sentence per line, from janeaustenr's R data.

Reads the lazy-load database of the R package janeaustenr (Debian's
r-cran-janeaustenr, extracted by scripts/fetch_austen.sh) with a small reader
of R's XDR serialization (standard library only), joins each novel's lines
into paragraphs, splits them into sentences and writes a deterministic sample.

    /usr/bin/python3 scripts/austen_sentences.py DATA_DIR OUT.txt [N]
    # DATA_DIR = .../usr/lib/R/site-library/janeaustenr/data (Rdata.rdb, Rdata.rdx)
    # prints e.g. "300 sentences (of 31456 with 5..60 words) -> OUT.txt"

Format notes (R Internals, "Serialization formats"; "Lazy loading"):
- Rdata.rdx: a compressed (gzip, or zlib) serialization of a list with
  `variables` = named list of integer [offset, length] into Rdata.rdb.
- Rdata.rdb entry: 4 bytes big-endian uncompressed length, then (compression 1)
  a zlib stream, or (compression 2/3) a type byte 'Z'/'2'/'X'/'0' then a
  zlib/bzip2/xz/uncompressed stream; inside: a serialization of the value.
- Serialization 'X\\n' (XDR = big-endian): version (2 or 3), writer version,
  minimal reader version, and for version 3 the native encoding (int n + n bytes).
  Each item starts with an int of flags: type = flags & 0xFF, object bit 8,
  attribute bit 9, tag bit 10, gp levels = flags >> 12.
"""
import bz2
import gzip
import lzma
import os
import re
import struct
import sys
import zlib

# SEXP types met in this data (and the few special markers the format uses)
NILSXP, SYMSXP, LISTSXP, CHARSXP, LGLSXP, INTSXP, REALSXP, STRSXP, VECSXP = 0, 1, 2, 9, 10, 13, 14, 16, 19
REFSXP, NILVALUE_SXP, GLOBALENV_SXP, EMPTYENV_SXP, BASEENV_SXP = 255, 254, 253, 242, 241
ATTRLISTSXP = 239
NA_INTEGER = -(2**31)

NOVELS = ["sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey", "persuasion"]


class RSymbol(str):
    """A symbol (SYMSXP): its name."""


class RList(list):
    """A generic vector (VECSXP) or pairlist, with its attributes (dict)."""

    def __init__(self, items, attrs=None):
        super().__init__(items)
        self.attrs = attrs or {}


class XdrReader:
    """Reads one R serialization (XDR) stream of vectors, strings and pairlists.

        value = XdrReader(raw_bytes).read_top()   # str list, int list, RList, ...
    """

    def __init__(self, data):
        self.d = data
        self.p = 0
        self.refs = []  # symbols (the only reference-table entries this data holds)

    def int(self):
        (v,) = struct.unpack_from(">i", self.d, self.p)
        self.p += 4
        return v

    def bytes(self, n):
        b = self.d[self.p:self.p + n]
        if len(b) != n:
            raise ValueError(f"truncated serialization at byte {self.p}")
        self.p += n
        return b

    def length(self):
        n = self.int()
        if n == -1:  # long vector: two ints
            hi, lo = self.int(), self.int()
            n = (hi << 32) + lo
        return n

    def read_top(self):
        if self.bytes(2) != b"X\n":
            raise ValueError("not an XDR R serialization (expected 'X\\n')")
        version = self.int()
        self.int()  # writer's R version
        self.int()  # minimal reader version
        if version == 3:
            self.bytes(self.int())  # native encoding, e.g. UTF-8
        elif version != 2:
            raise ValueError(f"serialization version {version} is not supported (2 or 3)")
        return self.item()

    def charsxp(self, flags):
        n = self.int()
        if n == -1:
            return None  # NA_character_
        raw = self.bytes(n)
        # gp levels: bit 3 (UTF8_MASK), 2 (LATIN1), 6 (ASCII); bytes are otherwise native (UTF-8 here)
        levels = flags >> 12
        return raw.decode("latin-1" if levels & 4 else "utf-8", errors="replace")

    def attributes(self, flags):
        return self.pairlist_dict(self.item()) if flags & (1 << 9) else {}

    @staticmethod
    def pairlist_dict(pl):
        if pl is None:
            return {}
        if isinstance(pl, RList) and "__pairlist_tags" in pl.attrs:
            return dict(zip(pl.attrs["__pairlist_tags"], pl))
        raise ValueError("attributes are not a pairlist")

    def item(self):
        flags = self.int()
        t = flags & 0xFF
        if t in (NILVALUE_SXP, NILSXP):
            return None
        if t in (GLOBALENV_SXP, EMPTYENV_SXP, BASEENV_SXP):
            return RSymbol(f"<env {t}>")
        if t == REFSXP:
            idx = flags >> 8
            if idx == 0:
                idx = self.int()
            return self.refs[idx - 1]
        if t == SYMSXP:
            name = RSymbol(self.item() or "")
            self.refs.append(name)
            return name
        if t in (LISTSXP, ATTRLISTSXP):
            items, tags = [], []
            attrs = {}
            while True:
                if flags & (1 << 9):
                    attrs.update(self.pairlist_dict(self.item()))
                tags.append(self.item() if flags & (1 << 10) else None)
                items.append(self.item())
                flags = self.int()  # the CDR: another cons cell, or the end
                t = flags & 0xFF
                if t not in (LISTSXP, ATTRLISTSXP):
                    if t not in (NILVALUE_SXP, NILSXP):
                        raise ValueError(f"dotted pairlist (CDR type {t}) is not supported")
                    break
            attrs["__pairlist_tags"] = [str(x) if x is not None else None for x in tags]
            return RList(items, attrs)
        if t == CHARSXP:
            return self.charsxp(flags)
        if t in (LGLSXP, INTSXP):
            n = self.length()
            v = list(struct.unpack_from(f">{n}i", self.d, self.p))
            self.p += 4 * n
            v = [None if x == NA_INTEGER else x for x in v]
            return RList(v, self.attributes(flags))
        if t == REALSXP:
            n = self.length()
            v = list(struct.unpack_from(f">{n}d", self.d, self.p))
            self.p += 8 * n
            return RList(v, self.attributes(flags))
        if t == STRSXP:
            n = self.length()
            v = []
            for _ in range(n):
                f = self.int()
                if f & 0xFF != CHARSXP:
                    raise ValueError(f"a string vector element has type {f & 0xFF}, expected CHARSXP (9)")
                v.append(self.charsxp(f))
            return RList(v, self.attributes(flags))
        if t == VECSXP:
            n = self.length()
            v = [self.item() for _ in range(n)]
            return RList(v, self.attributes(flags))
        raise ValueError(f"R type {t} is not supported by this reader (byte {self.p - 4})")


def decompress_file(raw):
    if raw[:2] == b"\x1f\x8b":
        return gzip.decompress(raw)
    return zlib.decompress(raw)


def rdb_entry(rdb, offset, length):
    blob = rdb[offset:offset + length]
    (size,) = struct.unpack_from(">I", blob, 0)
    body = blob[4:]
    kind = body[:1]
    if kind == b"Z":
        out = zlib.decompress(body[1:])
    elif kind == b"2":
        out = bz2.decompress(body[1:])
    elif kind == b"X":
        out = lzma.decompress(body[1:])
    elif kind == b"0":
        out = body[1:]
    else:
        out = zlib.decompress(body)
    if len(out) != size:
        raise ValueError(f"rdb entry at {offset}: {len(out)} bytes, header says {size}")
    return out


def load_novels(data_dir):
    """{novel name: list of lines (None for NA)} from Rdata.rdb/.rdx."""
    index = XdrReader(decompress_file(open(os.path.join(data_dir, "Rdata.rdx"), "rb").read())).read_top()
    top = dict(zip(index.attrs["names"], index))
    variables = dict(zip(top["variables"].attrs["names"], top["variables"]))
    rdb = open(os.path.join(data_dir, "Rdata.rdb"), "rb").read()
    novels = {}
    for name in NOVELS:
        if name not in variables:
            raise ValueError(f"{name} is not in Rdata.rdx (have {sorted(variables)})")
        off, length = variables[name]
        value = XdrReader(rdb_entry(rdb, off, length)).read_top()
        if not all(x is None or isinstance(x, str) for x in value):
            raise ValueError(f"{name} is not a character vector")
        novels[name] = list(value)
    return novels


SPLIT = re.compile(r"(?<=[.!?])[\"'\u201d\u2019_)]*\s+(?=[\"'\u201c\u2018_(]*[A-Z])")


ABBREV = re.compile(r"(?:^|\W)(?:Mr|Mrs|Dr|St|Col|Capt|Messrs)\.$")


def sentences(lines):
    """Paragraphs (lines joined, empty lines separate) split on . ! ? + space + capital."""
    paras, cur = [], []
    for line in lines:
        line = (line or "").strip()
        if line:
            cur.append(line)
        elif cur:
            paras.append(" ".join(cur))
            cur = []
    if cur:
        paras.append(" ".join(cur))
    out = []
    for p in paras:
        p = re.sub(r"\s+", " ", p.replace("_", ""))  # _italics_ markers of the Gutenberg text
        parts = []
        for s in (x.strip() for x in SPLIT.split(p)):
            if parts and ABBREV.search(parts[-1]):
                parts[-1] += " " + s  # "Mrs. Jennings": not a sentence end
            elif s:
                parts.append(s)
        out.extend(parts)
    return out


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    data_dir, out_path = argv[1], argv[2]
    n = int(argv[3]) if len(argv) == 4 else 300
    if n < 1:
        print("austen_sentences: N must be >= 1", file=sys.stderr)
        return 2
    novels = load_novels(data_dir)
    pool = []
    for name in NOVELS:
        pool.extend(s for s in sentences(novels[name]) if 5 <= len(s.split()) <= 60)
    if len(pool) < n:
        print(f"austen_sentences: only {len(pool)} sentences, asked for {n}", file=sys.stderr)
        return 1
    # deterministic: every k-th sentence across the six novels, in order
    k = len(pool) // n
    sample = [pool[i * k] for i in range(n)]
    tmp = out_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("".join(s + "\n" for s in sample))
    os.replace(tmp, out_path)
    print(f"{len(sample)} sentences (of {len(pool)} with 5..60 words) -> {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
