"""Numpy statements of rules whose one definition is libkazetts' (native/include/kazetts/rules.h):
second implementations written from the reference, which the tests and `kazetts validate` hold
the native rules against. The engine never runs them (tests/test_one_rule.py)."""
