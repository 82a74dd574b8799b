"""A definition's own PyTorch `reference` as a callable, and the error measure the side-by-side scripts check other
implementations against it with. Imports no torch itself (the tensors bring it), so CPU-only tools can import it."""


def reference_fn(d):
    """The `run` function of definition d's `reference` code."""
    scope = {}
    exec(compile(d["reference"], d["name"] + ".reference", "exec"), scope)
    return scope["run"]


def rel_err(got, want):
    """||got - want|| / ||want|| in float32 (the absolute norm where want is all zero)."""
    got, want = got.float(), want.float()
    den = want.norm().item()
    return (got - want).norm().item() / den if den > 0 else (got - want).norm().item()
