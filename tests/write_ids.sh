# Sourced by the e2e and bench scripts.
# write_ids FILE COUNT [VOCAB [STRIDE [OFFSET]]]: int32 token ids (i * STRIDE + OFFSET) % VOCAB
# (defaults 512, 37, 0) as .npy, without numpy
write_ids() {
  python3 - "$1" "$2" "${3:-512}" "${4:-37}" "${5:-0}" <<'PY'
import struct, sys
n, vocab, stride, offset = (int(a) for a in sys.argv[2:6])
hdr = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d,), }" % n
hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
    f.write(struct.pack("<%di" % n, *[(i * stride + offset) % vocab for i in range(n)]))
PY
}
