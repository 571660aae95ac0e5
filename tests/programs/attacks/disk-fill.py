# Writes into its working directory until the disk cap stops it.
written = 0
with open("fill.bin", "wb") as f:
    block = b"x" * (1024 * 1024)
    while True:
        f.write(block)
        f.flush()
        written += len(block)
