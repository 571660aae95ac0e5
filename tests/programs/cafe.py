# The café problem: three orders and their totals; what does each item cost?
#   2 coffees + 1 tea  + 1 cake  = 13.00
#   1 coffee  + 3 teas + 2 cakes = 19.00
#   3 coffees + 2 teas + 1 cake  = 18.00
# (The one copy: scripts/cafe-agent's scripted model and the model stand-in of
# tests/helpers/model_stub.py send this file as their tool call.)
import json

import numpy as np

orders = np.array([[2, 1, 1], [1, 3, 2], [3, 2, 1]], dtype=float)
totals = np.array([13.0, 19.0, 18.0])
prices = np.linalg.solve(orders, totals).round(2).tolist()
print(prices)
with open("result.json", "w") as f:
    json.dump(dict(zip(["coffee", "tea", "cake"], prices)), f)
