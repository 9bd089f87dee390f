"""The readers alone (no Redis): our folder format, the builtin GPU pool, Ops-6K column variants."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evalsvc.core.pools import PoolSource
from evalsvc.core.tasks import TaskSpec
from evalsvc.pools.builtin import builtin_sources, write_folder
from evalsvc.pools.importers import detect_format, read_folder, read_kernelbench, read_ops6k

ROOT = Path(__file__).resolve().parents[2]


def test_folder_format_reads_task_and_meta_with_level_tags() -> None:
    folder = ROOT / "tests" / "corpus" / "tasks"
    assert detect_format(folder) is PoolSource.FOLDER
    items = {c.name: c for c in read_folder(folder).items}
    assert {"l1/relu", "l2/gemm_bias_relu", "l3/mlp_block"} <= set(items)
    assert items["l2/gemm_bias_relu"].tags == {"level": "2", "ops": "linear,relu"}
    assert all(c.error is None for c in items.values())


def test_builtin_pool_round_trips_through_the_folder_format(tmp_path: Path) -> None:
    expected = dict(builtin_sources())
    assert len(expected) >= 30
    assert write_folder(tmp_path) == len(expected)
    read = {c.name: c.source for c in read_folder(tmp_path).items}
    assert read == expected
    for source in read.values():
        TaskSpec(source=source).check_syntax()
    assert len({TaskSpec(source=s).id for s in read.values()}) == len(read)  # no two alike


def test_kernelbench_reader_takes_a_repository_root(tmp_path: Path) -> None:
    level = tmp_path / "KernelBench" / "level3"
    level.mkdir(parents=True)
    (level / "10_Thing.py").write_text("x = 1\n")
    (level / "2_Other.py").write_text("y = 2\n")
    (level / "notes.txt").write_text("not a problem")
    assert detect_format(tmp_path) is PoolSource.KERNELBENCH
    reader = read_kernelbench(tmp_path)
    assert reader.total == 2
    assert [c.name for c in reader.items] == ["kernelbench/level3/2_Other", "kernelbench/level3/10_Thing"]


def test_ops6k_ops_as_json_text_and_missing_code_column(tmp_path: Path) -> None:
    good = tmp_path / "a.parquet"
    pq.write_table(
        pa.table({"code": ["c1"], "ops": ['["conv2d", "relu"]'], "data_source": ["torch#2"]}), good
    )
    (c,) = list(read_ops6k(good).items)
    assert c.tags == {"ops": "conv2d,relu", "data_source": "torch#2"} and c.origin == "a.parquet#row=0"
    bad = tmp_path / "b.parquet"
    pq.write_table(pa.table({"problem": ["c1"]}), bad)
    with pytest.raises(ValueError, match="no 'code' column"):
        read_ops6k(bad)


def test_gpu_vet_draws_a_seeded_sample_of_an_ops6k_file(tmp_path: Path) -> None:
    from bench.gpu_vet import _pool_sample

    path = tmp_path / "ops6k.parquet"
    pq.write_table(pa.table({"code": [f"x = {i}\n" for i in range(20)]}), path)
    names = [n for n, _ in _pool_sample(path, [], seed=3, sample=5)]
    assert names == [n for n, _ in _pool_sample(path, [], seed=3, sample=5)]  # the same draw for a seed
    assert len(names) == 5 and names == sorted(names)  # in pool order
    assert names != [n for n, _ in _pool_sample(path, [], seed=4, sample=5)]
    assert len(_pool_sample(path, [], seed=3, sample=50)) == 20 == len(_pool_sample(path, [], seed=3))
