# One small use of each of the five promised modules: a fit, a frame, a root, a derivative.
import json

import numpy as np
import pandas as pd
import scipy.optimize
import sklearn.linear_model
import sympy

x = np.arange(10, dtype=float)
y = 3 * x + 2
fit = sklearn.linear_model.LinearRegression().fit(x.reshape(-1, 1), y)
frame = pd.DataFrame({"x": x, "y": y})
root = scipy.optimize.brentq(lambda v: v * v - 2, 0, 2)
t = sympy.symbols("t")
derivative = str(sympy.diff(t**3 + 2 * t, t))
out = {
    "slope": round(float(fit.coef_[0]), 6),
    "mean_y": float(frame["y"].mean()),
    "sqrt2": round(root, 6),
    "derivative": derivative,
}
print(out)
with open("result.json", "w") as f:
    json.dump(out, f)
