"""The CartPole policy of torchrl_worker_example_test.py, shared by the
learner (TorchRL's venv) and the exporter (the Python with tensordict_cpp).

Run as a script, exports it: torchrl_worker_policy.py OUT.pt2
"""

import sys

import torch
from tensordict.nn import TensorDictModule, TensorDictSequential


class OneHotArgmax(torch.nn.Module):
    """Logits to CartPole's one-hot int64 action."""

    def forward(self, logits):
        return torch.nn.functional.one_hot(logits.argmax(-1), 2)


def make_policy():
    torch.manual_seed(0)
    return TensorDictSequential(
        TensorDictModule(torch.nn.Linear(4, 2), ["observation"], ["logits"]),
        TensorDictModule(OneHotArgmax(), ["logits"], ["action"]),
    )


if __name__ == "__main__":
    import tensordict_cpp
    from tensordict import TensorDict

    example = TensorDict(observation=torch.randn(4, 4), batch_size=[4])
    tensordict_cpp.export(make_policy(), example, sys.argv[1])
    print(sorted(TensorDict.from_module(make_policy()).flatten_keys(".").keys()))
