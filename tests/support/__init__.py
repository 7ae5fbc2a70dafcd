"""Helpers the tests share: fakes of outside services, rigs and shape checkers."""
