# tests/config — golden files of gshared's configuration parser.
UNIT_TESTS += tests/config/run.sh
