# Every random generator reachable from a loaded module (its attributes, and the attributes
# of the plain objects it holds), each with one draw; and multiprocessing's authkey. Two runs
# that share a generator's state print the same draw for it.
import json
import random
import sys
import types

kinds = [random.Random]
r = getattr(sys.modules.get("numpy"), "random", None)
for k in ("RandomState", "Generator"):
    if isinstance(getattr(r, k, None), type):
        kinds.append(getattr(r, k))
kinds = tuple(kinds)
found = {}


def draw(g):
    if isinstance(g, random.SystemRandom):
        return None  # the kernel's: nothing to share
    if isinstance(g, random.Random):
        return g.getrandbits(64)
    if hasattr(g, "bit_generator"):
        return int(g.integers(0, 2**63))
    return int(g.randint(0, 2**31))


for name, m in sorted(sys.modules.items()):
    d = getattr(m, "__dict__", None)
    if not isinstance(d, dict) or name == "__main__":
        continue
    for attr, v in list(d.items()):
        if isinstance(v, kinds):
            found.setdefault(f"{name}.{attr}", v)
        elif not isinstance(v, (type, types.ModuleType, types.FunctionType)):
            try:
                inner = vars(v)
            except TypeError:
                continue
            if isinstance(inner, dict):
                for a2, w in list(inner.items()):
                    if isinstance(w, kinds):
                        found.setdefault(f"{name}.{attr}.{a2}", w)
out = {k: draw(g) for k, g in found.items() if not isinstance(g, random.SystemRandom)}
import multiprocessing  # noqa: E402  (after the census: it must not add to it)

out["multiprocessing.authkey"] = multiprocessing.current_process().authkey.hex()
print(json.dumps(out, sort_keys=True))
