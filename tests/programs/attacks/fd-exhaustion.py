# Opens files until the descriptor limit stops it.
import os

fds = []
try:
    while True:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as e:
    print(len(fds), e.errno)
