"""The grader's proxies of a learner's code behave like the learner's code would locally:
same outputs, gradients, state, sharing and errors; only values cross the process boundary."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from autograder.sandbox.client import LearnerProcess, RemoteObject
from autograder.sandbox.launcher import Learner, Limits, learner_job
from autograder.sandbox.learner_errors import WorkerFailedError
from autograder.sandbox.remote_module import RemoteModule

LEARNER_CODE = '''
import numpy as np
import torch
from torch import nn


class Tied(nn.Module):
    """Two linear layers, a shared embedding table, a buffer, dropout and a method."""

    def __init__(self, vocab, d, p=0.5):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.proj = nn.Linear(d, vocab)
        self.proj.weight = self.embed.weight
        self.inner = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Dropout(p))
        self.register_buffer("scale", torch.tensor(2.0))
        self.register_buffer("cache", torch.zeros(3), persistent=False)
        self.config = {"vocab": vocab, "d": d}
        self.h = 2

    def encode(self, ids):
        return self.inner(self.embed(ids)) * self.scale

    def forward(self, ids):
        return self.proj(self.encode(ids))


class Pair(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.a = nn.Linear(d, d)

    def forward(self, x, y):
        out = self.a(x) * y
        return out, out.sum(-1).argmax(-1)


def in_place(x):
    x += 1
    return x.sum()


def numpy_in_place(x):
    x[0] = 42.0
    return float(x.sum())


def failing(x):
    values = [1, 2]
    return values[x]


def make_object():
    return object()


def detached(x):
    return (x * 2).detach()


class Counter:
    """A callable object with state and a method, as a key/value cache is."""

    def __init__(self, start):
        self.total = start

    def __call__(self, x):
        self.total += x
        return self.total

    def reset(self, value):
        self.total = value
'''

NAMES = ["Tied", "Pair", "in_place", "numpy_in_place", "failing", "make_object", "detached",
         "Counter"]


@pytest.fixture(scope="module")
def process():
    spec = {"course_roots": ["transformer_ref", "autograder"], "allowed_modules": [],
            "imports": [], "bindings": [], "definitions": [], "builders": [],
            "cells": [{"name": "learner_solution", "source": LEARNER_CODE}],
            "exercise_names": NAMES, "torch": True}
    with Learner(Limits(cell_timeout_s=30)) as learner, \
            learner_job(learner, None, spec, course=None) as job:
        running = LearnerProcess(job.command("learner", learner), job.path / "worker.log",
                                 env=job.env, call_timeout_s=30)
        yield running
        running.close()


def _local():
    namespace: dict = {}
    exec(compile(LEARNER_CODE, "<local>", "exec"), namespace)
    return namespace


def _pair(process, *args):
    """The learner's Tied module in its process and the same one locally, equal weights."""
    remote = process.proxy("Tied")(*args)
    local = _local()["Tied"](*args)
    local.load_state_dict(remote.state_dict())
    return remote, local


def test_the_mirror_has_the_learners_structure_names_and_sharing(process):
    remote, local = _pair(process, 11, 6)
    assert isinstance(remote, RemoteModule) and isinstance(remote, nn.Module)
    assert type(remote).__name__ == "Tied" and type(remote.inner).__name__ == "Sequential"
    assert isinstance(remote.inner[2], nn.Dropout) and remote.inner[2].p == 0.5
    assert remote.config == {"vocab": 11, "d": 6} and remote.h == 2
    assert [n for n, _ in remote.named_parameters(remove_duplicate=False)] == \
        [n for n, _ in local.named_parameters(remove_duplicate=False)]
    assert remote.proj.weight is remote.embed.weight  # tied in the learner's module
    assert list(remote.state_dict()) == list(local.state_dict())  # "cache" is not persistent
    assert sum(p.numel() for p in remote.parameters()) == sum(
        p.numel() for p in local.parameters())


def test_outputs_and_gradients_equal_the_local_module(process):
    remote, local = _pair(process, 9, 4)
    remote.double().eval()
    local.double().eval()
    ids = torch.tensor([[1, 2, 3], [4, 5, 0]])
    got, expected = remote(ids), local(ids)
    assert got.dtype == torch.float64 and torch.allclose(got, expected)
    cotangent = torch.randn_like(expected)
    (got * cotangent).sum().backward()
    (expected * cotangent).sum().backward()
    for (name, p), (_, q) in zip(remote.named_parameters(), local.named_parameters(),
                                 strict=True):
        assert torch.allclose(p.grad, q.grad), name
    hidden = remote.encode(ids)  # a public method of the learner's class
    assert torch.allclose(hidden, local.encode(ids))


def test_gradients_reach_the_inputs_and_non_tensor_outputs_stay_values(process):
    pair = process.proxy("Pair")(3).double()
    x = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    y = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    out, index = pair(x, y)
    assert index.dtype == torch.int64 and not index.requires_grad
    out.sum().backward()
    local = _local()["Pair"](3).double()
    local.load_state_dict(pair.state_dict())
    x2, y2 = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
    local(x2, y2)[0].sum().backward()
    assert torch.allclose(x.grad, x2.grad) and torch.allclose(y.grad, y2.grad)


def test_training_mode_and_seeding_reach_the_learners_process(process):
    remote, _ = _pair(process, 7, 8)
    remote.train()
    assert remote.training and remote.inner[2].training
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        remote.remote_seed(3)
        first = remote(ids)
        remote.remote_seed(3)
        again = remote(ids)
        other = remote(ids)
    assert torch.equal(first, again) and not torch.equal(first, other)
    remote.eval()
    assert not remote.inner[2].training
    with torch.no_grad():
        assert torch.equal(remote(ids), remote(ids))


def test_load_state_dict_is_the_learners_own(process):
    remote, local = _pair(process, 5, 4)
    state = {k: torch.ones_like(v) for k, v in local.state_dict().items()}
    remote.load_state_dict(state)
    assert all(torch.equal(v, torch.ones_like(v)) for v in remote.state_dict().values())
    with pytest.raises(RuntimeError, match="Missing key"):
        remote.load_state_dict({})
    keys = remote.load_state_dict({"extra": torch.zeros(1)}, strict=False)
    assert keys.unexpected_keys == ["extra"] and "embed.weight" in keys.missing_keys


def test_in_place_changes_and_detached_outputs_show_as_they_would_locally(process):
    x = torch.zeros(3)
    process.proxy("in_place")(x)
    assert torch.equal(x, torch.ones(3))
    a = np.zeros(4)
    assert process.proxy("numpy_in_place")(a) == 42.0 and a[0] == 42.0
    leaf = torch.ones(2, requires_grad=True)
    assert not process.proxy("detached")(leaf).requires_grad


def test_learner_errors_carry_their_type_and_the_learners_line(process):
    with pytest.raises(IndexError) as info:
        process.proxy("failing")(5)
    where = info.value.learner_line
    assert where["cell"] == "learner_solution" and where["text"] == "return values[x]"
    assert where["function"] == "failing"


def test_objects_that_cannot_travel_stay_in_the_learners_process(process):
    value = process.proxy("make_object")()
    assert isinstance(value, RemoteObject) and "object" in repr(value)
    assert process.proxy("missing") is None


def test_the_grader_sends_values_only(process):
    with pytest.raises(WorkerFailedError, match="cannot send"):
        process.proxy("failing")(lambda: 1)


def test_a_learners_callable_object_keeps_its_state_and_its_methods_are_reached(process):
    counter = process.proxy("Counter")(2)
    assert counter(3) == 5 and counter(1) == 6
    counter.reset(10)
    assert counter(1) == 11
    with pytest.raises(AttributeError):
        counter.missing(1)  # the learner's object has no such method
    with pytest.raises(AttributeError):
        counter._private  # noqa: B018 - private names are never looked up remotely
    with pytest.raises(AttributeError):
        process.proxy("failing").anything  # noqa: B018 - a named function has no methods
