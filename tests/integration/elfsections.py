"""Every allocated section of an ELF object, read without any tool: what a linker or a loader reads.

Objects are compared by every section with SHF_ALLOC (code, data, the string sections .rodata.str1.*
where GCC puts string literals from -O1 on, .nv_fatbin, __nv_module_id, ...), not by a few named ones:
a comparison of .text/.data/.rodata alone is blind to a path in a string literal. SHT_NOBITS sections
(.bss) have no bytes and are compared by size. Relocations, symbols and debug sections are not
allocated; tests that care about debug names read them with readelf.
"""
import struct

SHF_ALLOC = 0x2
SHT_NOBITS = 8


def allocated_sections(path):
    """{section name: bytes} for every SHF_ALLOC section of the ELF64 little-endian file at path
    (.bss-like sections as a size marker). Raises ValueError for anything else."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]

    def name_of(offset):
        start = names_at + offset
        return data[start:data.index(b"\0", start)].decode("utf-8", "replace")

    out = {}
    for name_off, sh_type, flags, _addr, offset, size, *_ in headers:
        if not flags & SHF_ALLOC:
            continue
        name = name_of(name_off)
        body = f"<nobits {size}>".encode() if sh_type == SHT_NOBITS else data[offset:offset + size]
        # Several sections may share a name (.text in COMDAT groups): keep each, in order.
        key, n = name, 1
        while key in out:
            n += 1
            key = f"{name}#{n}"
        out[key] = body
    return out
