"""The gathering modules lend each name once, from the module that defines it, and the package
lends exactly their union."""

import ast
import importlib
import subprocess
import sys

import pytest

import transformer_ref

GATHERINGS = ("np_attention", "np_layers", "modules", "masks", "decoding")


def test_the_package_lends_exactly_the_union_of_the_gathering_modules():
    gathered = [importlib.import_module(f"transformer_ref.{name}") for name in GATHERINGS]
    assert tuple(gathered) == transformer_ref.GATHERING_MODULES
    union = [name for module in gathered for name in module.__all__]
    assert len(union) == len(set(union)), "a name is lent by two gathering modules"
    assert sorted(transformer_ref.__all__) == sorted(union)
    assert dir(transformer_ref) == sorted(union)


@pytest.mark.parametrize("gathering", GATHERINGS)
def test_each_lent_name_is_the_defining_modules_object(gathering):
    module = importlib.import_module(f"transformer_ref.{gathering}")
    for name in module.__all__:
        value = getattr(module, name)
        assert getattr(transformer_ref, name) is value
        if callable(value):
            assert value.__module__.startswith("transformer_ref.")
            assert value.__module__.rpartition(".")[2] not in GATHERINGS


def test_importing_the_package_loads_no_building_block():
    code = ("import sys, transformer_ref\n"
            "print(sorted(m for m in sys.modules if m.startswith('transformer_ref')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout
    assert ast.literal_eval(loaded) == sorted(["transformer_ref", "transformer_ref.lazy", *(
        f"transformer_ref.{name}" for name in GATHERINGS)])
