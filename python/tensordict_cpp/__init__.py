"""Export TensorDict modules to AOTInductor packages for TensorDict for C++.

``tensordict_cpp.export(module, example, path)`` writes a ``.pt2`` package
that ``tensordict::nn::AOTIModule`` runs from C++ with a TensorDict in and a
TensorDict out::

    policy = TensorDictSequential(...)
    example = TensorDict({"obs": torch.randn(8, 3)}, batch_size=[8])
    tensordict_cpp.export(policy, example, "policy.pt2")

and in C++::

    tensordict::nn::AOTIModule policy("policy.pt2");
    TensorDict out = policy(td);
"""

from ._export import export, METADATA_FORMAT, METADATA_FORMAT_PROBABILISTIC

__all__ = ["export", "METADATA_FORMAT", "METADATA_FORMAT_PROBABILISTIC"]
