"""A stand-in multi-GPU kernel: each rank writes tagged words into the next rank's symmetric buffer,
raises a flag per chunk, and waits for its own flags with a deadline. It exercises what the drafter's
TP4 launch needs of a launch group (rendezvous, peer exchange, flag waits, health words, event timing)
on any GPUs torch drives, and on CPUs emulated."""
