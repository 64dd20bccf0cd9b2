"""What every framework's trainer shares: data order, CIFAR files, the schedule, the device clock, the CPU's
precision choice, metrics lines, the start-up record and atomic writes. Frameworks are imported inside functions."""
