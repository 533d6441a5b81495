"""A module that initialises the (faked) CUDA driver by a way the fork server cannot answer
for it: the server must find out and refuse to fork (preloaded after tests.plugins.fake_cuda)."""

from tests.plugins import fake_cuda

fake_cuda.DRIVER_TOUCHED = True
