"""The judge side's Triton host modules: which traced signatures get a launcher, and what a runner's copy of
a Triton artifact's cache holds (only our native modules, our host facts)."""

import json
from pathlib import Path

from evalsvc.engine.triton_driver import HOST_FACTS, add_driver, signatures


def test_signatures_keep_only_triton_types_and_plain_names() -> None:
    traced = [
        "x_ptr: *fp32, out: *kbf16, n: i64, flag: i1, BLOCK: constexpr",
        'x: *fp32, n: i32); system("id"',  # a type no Triton signature has
        "__import__('os'): *fp32",  # not a name
        "t: (i32, i32)",  # tuples are not built ahead
        "",
    ]
    assert signatures(traced) == [
        (("x_ptr", "out", "n", "flag", "BLOCK"), ("*fp32", "*kbf16", "i64", "i1", "constexpr"))
    ]


def test_runner_copy_holds_only_our_modules_and_facts(tmp_path: Path) -> None:
    cache = tmp_path / "artifact-cache"
    (cache / "kernelhash").mkdir(parents=True)
    (cache / "kernelhash" / "relu.cubin").write_bytes(b"cubin")
    (cache / "utilshash").mkdir()
    (cache / "utilshash" / "cuda_utils.so").write_bytes(b"planted by the solution at compile time")
    (cache / "kernelhash" / "extra.so").write_bytes(b"planted")
    (cache / HOST_FACTS).write_text(json.dumps({"ptxas_version": "forged"}))
    (cache / "link").symlink_to("/etc/passwd")
    driver = tmp_path / "driver"
    (driver / "utilshash").mkdir(parents=True)
    (driver / "utilshash" / "cuda_utils.so").write_bytes(b"ours")

    add_driver(cache, driver, {"libcuda_dir": "/usr/lib/x86_64-linux-gnu", "ptxas_version": "ptxas 13.0"})

    assert (cache / "utilshash" / "cuda_utils.so").read_bytes() == b"ours"
    assert not (cache / "kernelhash" / "extra.so").exists()
    assert (cache / "kernelhash" / "relu.cubin").read_bytes() == b"cubin"
    assert not (cache / "link").is_symlink()
    assert json.loads((cache / HOST_FACTS).read_text())["ptxas_version"] == "ptxas 13.0"
