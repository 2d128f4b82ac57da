"""A model file is untrusted input: a crafted file is refused harmlessly, without hanging.

A fixed-seed fuzzer mutates the prefix, the JSON header, the configuration and the
array records of small committed model files (recomputing the checksum, so that the
mutations reach the parser), and every case must either load or raise
`PersistenceError`/`ValueError` within a second — never `MemoryError`, a hang, or
another exception — while opening no other file and unpickling or executing nothing.
"""

import copy
import hashlib
import json
import pathlib
import random
import struct
import sys
import time
import tracemalloc

import numpy as np
import pytest

import geomlearn as gl
from geomlearn.io import PersistenceError, _container

MODELS = pathlib.Path(__file__).parent / "data" / "models"
SOURCES = ("ResNet", "PSympNet", "MultiStep", "HamiltonianNeuralNetwork")
N_CASES = 300
# A hang detector, not a speed target (speeds belong in benchmarks/): a case that loads
# traces a model's constructor, which takes about a second on a loaded 2-core machine; a
# crafted file that made `load` loop or parse without bound would run far past this.
SECONDS_PER_CASE = 20.0

# ------------------------------------------------------------------ what a load may do

_WATCH = {"active": False, "path": None, "events": []}
_FORBIDDEN = ("pickle.find_class", "exec", "os.system", "subprocess.Popen", "os.exec",
              "os.posix_spawn", "socket.connect", "os.remove", "os.rename", "os.unlink",
              "shutil.", "ctypes.")


def _audit(event, args):
    if not _WATCH["active"]:
        return
    if event == "open" and args and isinstance(args[0], (str, bytes, pathlib.Path)):
        target = str(args[0] if not isinstance(args[0], bytes) else args[0].decode())
        # Python's own files (source lines for a traceback, extension modules) are fine
        if target != _WATCH["path"] and not (target.endswith((".py", ".pyc", ".so"))
                                             or target.startswith((sys.prefix, sys.base_prefix))):
            _WATCH["events"].append((event, target))
    elif event.startswith(_FORBIDDEN):
        _WATCH["events"].append((event, repr(args)[:100]))


sys.addaudithook(_audit)  # inert outside `_guarded_load` (the flag above)


def _guarded_load(path):
    _WATCH.update(active=True, path=str(path), events=[])
    try:
        return gl.load(path)
    finally:
        _WATCH["active"] = False


# -------------------------------------------------------------------- file building

def _pack(header: dict, sections: dict, *, version=_container.FORMAT_VERSION, header_bytes=None,
          header_len=None) -> bytes:
    header = dict(header)
    header["sections"] = header.get("sections", [[n, len(b)] for n, b in sections.items()])
    hb = header_bytes if header_bytes is not None else json.dumps(header, allow_nan=True).encode()
    n = len(hb) if header_len is None else header_len
    body = struct.pack("<8sIQ", _container.MAGIC, version, n) + hb + b"".join(sections.values())
    return body + hashlib.sha256(body).digest()


def _source(name):
    header, sections = _container.read_container(MODELS / f"{name}.geomlearn")
    header.pop("sections")
    return header, sections


_JUNK = [None, True, -1, 0, 2**31, 2**63, 10**30, -10**9, 1e308, float("nan"), float("inf"), "",
         "../../../etc/passwd", "/etc/passwd", "os.system", "__import__('os')", "float64", "object",
         "O", "<U8", [], {}, [[]], {"__tuple__": 5}, {"__list__": [1, [2]]}, {"__model__": {}},
         {"__model__": {"class": "MultiStep", "config": {}}}, {"__activation__": "eval"},
         {"__activation__": ["tanh"]}, {"__function__": "print"}, {"a": 1, "b": 2}, "x" * 1000]


def _paths(value, prefix=()):
    yield prefix
    if len(prefix) > 8:  # not into the deep nesting a previous mutation made
        return
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


def _set(tree, path, value):
    if not path:
        return value
    node = tree
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return tree


def _mutate_header(rng, header):
    h = copy.deepcopy(header)
    for _ in range(rng.randint(1, 3)):
        paths = list(_paths(h))[1:]
        path = rng.choice(paths)
        kind = rng.random()
        if kind < 0.6:
            h = _set(h, path, copy.deepcopy(rng.choice(_JUNK)))
        elif kind < 0.8 and isinstance(path[-1], str):
            parent = h
            for p in path[:-1]:
                parent = parent[p]
            parent.pop(path[-1], None)
        else:  # deep nesting where a value was
            deep = 1
            for _ in range(rng.choice([10, 200, 400])):
                deep = {"__list__": [deep]} if rng.random() < 0.5 else [deep]
            h = _set(h, path, deep)
    return h


def _npy_records(blob):
    """Offsets of the `.npy` records in a section."""
    out, i = [], 0
    while i < len(blob):
        out.append(i)
        hlen = struct.unpack_from("<H", blob, i + 8)[0]
        header = blob[i + 10:i + 10 + hlen].decode("latin1")
        shape = eval(header, {})["shape"]  # noqa: S307 — our own, trusted fixture
        size = int(np.prod(shape)) * np.dtype(eval(header, {})["descr"]).itemsize  # noqa: S307
        i += 10 + hlen + size
    return out


def _mutate_payload(rng, blob):
    blob = bytearray(blob)
    start = rng.choice(_npy_records(bytes(blob)))
    hlen = struct.unpack_from("<H", blob, start + 8)[0]
    text = blob[start + 10:start + 10 + hlen].decode("latin1")
    choice = rng.random()
    if choice < 0.3:
        new = text.replace("'shape': (", f"'shape': ({rng.choice([2**40, 10**6, 0, 7])}, ", 1)
    elif choice < 0.5:
        new = text.replace(text[text.index("'descr'"):text.index(",")], rng.choice(
            ["'descr': '|O'", "'descr': '<f8'", "'descr': '<U4'", "'descr': [('a', '<f4')]",
             "'descr': '|V4'"]), 1)
    elif choice < 0.6:
        new = "{'descr': __import__('os').system('true'), 'fortran_order': False, 'shape': (1,), }"
    elif choice < 0.7:
        new = text.replace("False", "True", 1)
    else:  # random bytes in the record
        pos = rng.randrange(start, len(blob))
        blob[pos] = rng.randrange(256)
        return bytes(blob)
    new = new.ljust(hlen - 1)[: hlen - 1] + "\n" if len(new) < hlen else new + "\n"
    encoded = new.encode("latin1")
    if len(encoded) != hlen:  # a header of another length (and the length field with it)
        blob[start + 8:start + 10] = struct.pack("<H", len(encoded))
    blob[start + 10:start + 10 + hlen] = encoded
    return bytes(blob)


def _case(rng, i):
    header, sections = _source(SOURCES[i % len(SOURCES)])
    kind = i % 6
    if kind in (0, 1, 2):
        return _pack(_mutate_header(rng, header), sections)
    if kind == 3:
        return _pack(header, {"model": _mutate_payload(rng, sections["model"])})
    if kind == 4 and rng.random() < 0.25:  # nesting far deeper than Python's recursion limit
        text = json.dumps({**header, "sections": [["model", len(sections["model"])]]})
        depth = rng.choice([2000, 100000])
        deep = rng.choice(["[", '{"__list__": ['])
        close = "]" if deep == "[" else "]}"
        text = text.replace('"config": {', '"config": {"x": ' + deep * depth + "1" + close * depth + ", ", 1)
        return _pack(header, sections, header_bytes=text.encode())
    if kind == 4:  # the header's bytes themselves, or its declared length
        hb = bytearray(json.dumps({**header, "sections": [["model", len(sections["model"])]]}).encode())
        for _ in range(rng.randint(1, 4)):
            hb[rng.randrange(len(hb))] = rng.randrange(256)
        return _pack(header, sections, header_bytes=bytes(hb),
                     header_len=rng.choice([None, None, 0, 2**63, len(hb) + 5]))
    sec = rng.choice([[["model", -5], ["x", 10**9]], [["model", 10**12]], [["model", 1], ["model", 1]],
                      "model", [["model", "496"]], [[1, 2]], None])
    return _pack({**header, "sections": sec}, sections,
                 version=rng.choice([_container.FORMAT_VERSION, 0, 2**32 - 1]))


def test_the_fuzzer_refuses_every_crafted_file_harmlessly_without_hanging(tmp_path):
    rng = random.Random(20261201)
    for name in SOURCES:  # the first load of a class traces its constructor: not a crafted file's cost
        gl.load(MODELS / f"{name}.geomlearn")
    outcomes = {"loaded": 0, "refused": 0}
    peak = 0
    for i in range(N_CASES):
        path = tmp_path / f"case{i}.geomlearn"
        path.write_bytes(_case(rng, i))
        tracemalloc.start()
        t0 = time.perf_counter()
        try:
            _guarded_load(path)
            outcomes["loaded"] += 1
        except ValueError:  # PersistenceError is one
            outcomes["refused"] += 1
        except Exception as e:  # noqa: BLE001 — the point of the test
            pytest.fail(f"case {i}: {type(e).__name__}: {e!s:.300}")
        finally:
            peak = max(peak, tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
        seconds = time.perf_counter() - t0
        assert seconds < SECONDS_PER_CASE, f"case {i} took {seconds:.2f} s"
        assert not _WATCH["events"], f"case {i}: {_WATCH['events']}"
    assert outcomes["refused"] > 0.8 * N_CASES, outcomes
    assert peak < 64 * 2**20, f"a load allocated {peak / 2**20:.0f} MiB"


def test_a_declared_shape_larger_than_the_bytes_present_is_refused_before_allocating(tmp_path):
    # the configuration asks for a big model (every size within the file's size bound) and
    # the records declare the shapes it expects, but the bytes are not there
    header, sections = _source("ResNet")
    header["config"]["width"] = 1000
    fake = b""
    for shape in [(1, 1000, 3), (1, 1000), (3, 1000), (3,)]:
        h = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}".ljust(117) + "\n"
        fake += b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode()
    fake = fake.ljust(1200, b"\0")
    path = tmp_path / "big"
    path.write_bytes(_pack(header, {"model": fake}))
    tracemalloc.start()
    try:
        with pytest.raises(PersistenceError, match="has only .* bytes left|does not fit"):
            gl.load(path)
        assert tracemalloc.get_traced_memory()[1] < 4 * 2**20
    finally:
        tracemalloc.stop()


def test_an_integer_beyond_what_the_file_could_describe_is_refused(tmp_path):
    header, sections = _source("ResNet")
    header["config"]["depth"] = 10**7  # a skeleton of ten million layers would hang
    path = tmp_path / "deep"
    path.write_bytes(_pack(header, sections))
    t0 = time.perf_counter()
    with pytest.raises(PersistenceError, match="larger than the file"):
        gl.load(path)
    assert time.perf_counter() - t0 < 1.0


def test_no_pickled_record_and_no_other_file_is_touched(tmp_path):
    header, sections = _source("ResNet")
    buf = __import__("io").BytesIO()
    np.save(buf, np.array([print], dtype=object), allow_pickle=True)
    path = tmp_path / "pickled"
    path.write_bytes(_pack(header, {"model": buf.getvalue() + sections["model"]}))
    with pytest.raises(PersistenceError):
        _guarded_load(path)
    assert not _WATCH["events"]
    # the class name is a key of a table, never a module path
    header["class"] = "os.system"
    path.write_bytes(_pack(header, sections))
    with pytest.raises(PersistenceError, match="unknown model class"):
        _guarded_load(path)
    assert not _WATCH["events"]


def test_a_fifo_or_a_folder_is_refused_without_waiting(tmp_path):
    import os

    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(PersistenceError, match="not a regular file"):
        gl.load(tmp_path / "fifo")  # reading a FIFO would block until a writer comes
    with pytest.raises(PersistenceError, match="not a regular file"):
        gl.load(tmp_path)
