"""Loaders (c2np.loaders): rows from the task API on every path (no held-out material or
validation radius in a training split, under every protocol), a path or an open store,
items with the unit cell and task-2 targets on training rows only, PyG ``Data`` batches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from c2np.errors import C2NPInputError
from c2np.loaders import (
    LABELLED_SPLITS,
    collate_particles,
    iter_arrays,
    iter_atoms,
    iter_items,
    loader_rows,
    pyg_dataset,
    torch_dataset,
)
from c2np.splits import PROTOCOLS, SPLITS
from c2np.store import DatasetStore, build_store
from c2np.tasks import InverseTask, example_rows, inverse_target, select_rows
from helpers import perovskite


def _radii(protocol: str) -> list[int]:
    """An OOD radius, a validation radius (where the protocol has one) and a training radius."""
    proto = PROTOCOLS[protocol]
    train = [r for r in proto.train_radii_angstrom if r not in proto.val_radii_angstrom]
    return sorted({proto.ood_radii_angstrom[0], *proto.val_radii_angstrom[:1], train[1]})


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One small store per protocol (five perovskites, so a held-out fraction holds one out)."""
    cells = [perovskite(a=4.0 + 0.05 * i, ids=f"M{i}", A=[19, 11, 37, 55, 3][i]) for i in range(5)]
    root = tmp_path_factory.mktemp("loaders")
    return {name: build_store(cells, root / f"{name}.h5", name, radii_angstrom=_radii(name), progress=False)
            for name in PROTOCOLS}


def _ids_of_every_path(path: Path, split: str) -> dict[str, list[str]]:
    """The sample ids of ``split`` as each loader yields them (from the path, as a user would)."""
    out = {"iter_items": [it["sample_id"] for it in iter_items(path, split)],
           "iter_arrays": [sid for sid, _, _ in iter_arrays(path, split)],
           "iter_atoms": [a.info["sample_id"] for a in iter_atoms(path, split)]}
    if pytest.importorskip("torch"):
        ds = torch_dataset(path, split)
        out["torch_dataset"] = [ds[i]["sample_id"] for i in range(len(ds))]
    try:
        import torch_geometric  # noqa: F401
    except ImportError:
        return out
    pyg = pyg_dataset(path, split)
    out["pyg_dataset"] = [pyg[i].sample_id for i in range(len(pyg))]
    return out


def test_no_heldout_material_or_validation_radius_in_a_training_split(stores: dict[str, Path]) -> None:
    covered = []
    for name, path in stores.items():
        store = DatasetStore.open(path)
        t = store.recipes
        held = {t.materials.index(m) for m in t.heldout_materials}
        val_radii = set(PROTOCOLS[name].val_radii_angstrom)
        index = {sid: i for i, sid in enumerate(t.sample_ids())}
        for split in LABELLED_SPLITS:
            expected = [t.sample_id(int(r)) for r in example_rows(t, split)]
            for loader, ids in _ids_of_every_path(path, split).items():
                where = f"{name} {split} {loader}"
                assert ids == expected, where
                rows = np.array([index[s] for s in ids], dtype=np.int64)
                assert not np.isin(t.material_index[rows], list(held)).any(), where
                assert np.all(t.split[rows] == SPLITS.index(split)), where
                if split == "train":
                    assert not set(t.radius_angstrom[rows].tolist()) & val_radii, where
        if held:
            covered.append(name)
            # the held-out rows exist and are readable as the evaluation split, never as training
            heldout = loader_rows(t, "heldout")
            assert set(t.material_index[heldout]) == held
            assert np.array_equal(heldout, select_rows(t, "heldout", "full"))
            # the loaders see what the task API gives a model to fit
            inv_rows = {q.sample_id for q, _ in InverseTask(store, "heldout").training_examples()}
            assert len(inv_rows) == len(example_rows(t, "train"))
    assert "strict" in covered  # every protocol holding out materials is checked, strict among them


def test_a_path_or_an_open_store(stores: dict[str, Path]) -> None:
    pytest.importorskip("torch")
    path = stores["strict"]
    by_path, by_store = torch_dataset(path, "val"), torch_dataset(DatasetStore.open(path), "val")
    assert len(by_path) == len(by_store) > 0
    assert by_path[0]["sample_id"] == by_store[0]["sample_id"]
    assert len(torch_dataset(str(path), "val")) == len(by_path)
    with pytest.raises(C2NPInputError, match="DatasetStore or the path"):
        torch_dataset(42, "train")  # type: ignore[arg-type]
    with pytest.raises(C2NPInputError, match="no such dataset store"):
        list(iter_arrays(path.parent / "missing.h5", "train"))
    with pytest.raises(C2NPInputError, match="unknown split"):
        list(iter_items(path, "everything"))


def test_items_carry_targets_on_training_rows_only(stores: dict[str, Path]) -> None:
    torch = pytest.importorskip("torch")
    store = DatasetStore.open(stores["strict"])
    t = store.recipes
    ds = torch_dataset(store, "train", rotations_per_group=2)
    assert len(ds) == len(example_rows(t, "train", rotations_per_group=2))
    item = ds[0]
    row = int(store.rows_for_ids([item["sample_id"]])[0])
    mat = t.materials[int(t.material_index[row])]
    cell, target = store.cells[mat], inverse_target(store.cells[mat])
    nums, pos = store.particle_arrays(row)
    assert torch.equal(item["numbers"], torch.as_tensor(nums))
    assert torch.allclose(item["positions"], torch.as_tensor(pos, dtype=torch.float32))
    assert item["radius_angstrom"] == float(t.radius_angstrom[row])
    assert torch.allclose(item["quaternion"], torch.as_tensor(t.quaternion[row], dtype=torch.float32))
    assert torch.allclose(item["centre_frac"], torch.as_tensor(t.centre_frac, dtype=torch.float32))
    assert torch.allclose(item["cell"], torch.tensor(np.array(cell.lattice_angstrom), dtype=torch.float32))
    assert torch.equal(item["cell_numbers"], torch.tensor(np.array(cell.numbers)))
    assert np.allclose(item["lattice"].numpy(), target.parameters.as_array(), atol=1e-5)
    assert item["spacegroup"] == target.spacegroup == 221
    batch = collate_particles([ds[0], ds[1], ds[2]])
    assert batch["cell"].shape == (3, 3, 3) and batch["lattice"].shape == (3, 6)
    assert batch["spacegroup"].tolist() == [221] * 3
    assert batch["ptr"][-1] == len(batch["numbers"]) == len(batch["batch"])
    assert len(batch["cell_batch"]) == len(batch["cell_numbers"]) == 15
    for split in ("id", "ood", "test", "heldout"):  # task-2 evaluation rows: no cell, no target
        rows = loader_rows(t, split)
        if len(rows) == 0:
            continue
        ev = torch_dataset(store, split)
        assert len(ev) == len(rows)
        assert not {"cell", "lattice", "spacegroup", "material_index"} & set(ev[0])
        first = next(iter_items(store, split))
        assert "spacegroup" not in first and "cell_lattice_angstrom" not in first
        atoms = next(iter_atoms(store, split))
        assert "spacegroup" not in atoms.info and "material" not in atoms.info
    with pytest.raises(C2NPInputError, match="rotations_per_group applies"):
        loader_rows(t, "id", rotations_per_group=1)


def test_a_pyg_batch_trains_one_step_of_a_tiny_model(stores: dict[str, Path], torch_one_thread) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch_geometric")
    from torch_geometric.loader import DataLoader
    from torch_geometric.utils import scatter

    ds = pyg_dataset(stores["strict"], "train", rotations_per_group=2)
    batch = next(iter(DataLoader(ds, batch_size=4, shuffle=False)))
    assert batch.num_graphs == 4 and batch.lattice.shape == (4, 6) and batch.cell.shape == (4, 3, 3)
    assert batch.spacegroup.tolist() == [221] * 4 and int(batch.num_cell_atoms.sum()) == len(batch.cell_z)
    assert batch.pos.shape == (len(batch.z), 3) and int(batch.batch.max()) == 3

    torch.manual_seed(0)
    embed = torch.nn.Embedding(119, 8)
    head = torch.nn.Linear(9, 6)
    params = [*embed.parameters(), *head.parameters()]
    opt = torch.optim.SGD(params, lr=1e-3)
    before = [p.detach().clone() for p in params]
    h = scatter(embed(batch.z), batch.batch, dim=0, reduce="mean")
    pred = head(torch.cat([h, batch.radius.reshape(-1, 1)], dim=1))
    loss = torch.nn.functional.mse_loss(pred, batch.lattice)
    opt.zero_grad()
    loss.backward()
    opt.step()
    assert torch.isfinite(loss) and loss.item() > 0
    assert all(not torch.equal(a, b.detach()) for a, b in zip(before, params))
