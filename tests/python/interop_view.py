"""The canonical JSON-able view of a tensordict that interop_view.h gives in
C++, so that an interop test can compare what each side loaded: batch size,
device, names, and per key (sorted) a nested view, a lazy stack's elements,
a non-tensor value or a leaf's dtype, shape and values (as floats)."""

import torch
from tensordict import LazyStackedTensorDict, NonTensorData, NonTensorStack, is_tensorclass


def dump_value(value):
    flat = value.reshape(-1)
    if flat.is_complex():
        values = torch.view_as_real(flat).reshape(-1).double().tolist()
    else:
        values = flat.double().tolist()
    return {"dtype": str(value.dtype), "shape": list(value.shape), "values": values}


def dump_stack(stack, with_name=False):
    """The stack dim (and its name if `with_name`) and each element's view."""
    out = {"stack_dim": stack.stack_dim}
    if with_name:
        out["stack_dim_name"] = stack._td_dim_name
    out["elements"] = [dump(e) for e in stack.tensordicts]
    return out


def dump(td):
    """The view of a tensordict; a lazy stack gives dump_stack(td)."""
    if isinstance(td, LazyStackedTensorDict):
        return dump_stack(td)
    if is_tensorclass(td) and not isinstance(td, (NonTensorData, NonTensorStack)):
        # A tensorclass is viewed as its dict (C++ keeps the class aside).
        td = td._tensordict
    result = {
        "batch_size": list(td.batch_size),
        "device": None if td.device is None else str(td.device),
        "entries": {},
    }
    names = td.names
    result["names"] = list(names) if any(n is not None for n in names) else []
    for key in sorted(td.keys()):
        value = td.get(key)
        if isinstance(value, NonTensorStack):
            result["entries"][key] = {"non_tensor": value.tolist()}
        elif isinstance(value, NonTensorData):
            result["entries"][key] = {"non_tensor": value.data}
        elif isinstance(value, torch.Tensor):
            result["entries"][key] = dump_value(value)
        else:
            result["entries"][key] = dump(value)
    return result
