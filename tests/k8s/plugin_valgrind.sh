#!/bin/sh
# The device plugin integration run with the plugin under valgrind for its
# whole life (two plugin processes: before and after its restart); fails
# on any definite leak or memory error.  Fewer Allocates than the native
# run: valgrind makes each one ~10x slower.
exec /usr/bin/python3 "$(dirname "$0")/test_plugin.py" --valgrind --allocs 200
