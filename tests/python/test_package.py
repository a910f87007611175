#!/usr/bin/env python3
"""The fold package alone (one process, no launcher): version, configuration as
fold_info prints it, the launcher's env:// variables, the backend's registration.

Usage: test_package.py VERSION   (the project's version, which the package must report)
"""
import os
import sys
import unittest

import fold
from fold import launcher

EXPECTED_VERSION = sys.argv.pop(1)


class Package(unittest.TestCase):
    def test_version(self):
        self.assertEqual(fold.__version__, EXPECTED_VERSION)
        if fold.backend_available:
            self.assertEqual(fold.library_version(), EXPECTED_VERSION)

    def test_config_defaults_and_environment(self):
        os.environ.pop("FOLD_TIMEOUT", None)
        timeout = fold.config()["FOLD_TIMEOUT"]
        self.assertEqual((timeout.default, timeout.value, timeout.from_env), ("120", "120", False))
        self.assertIn("progress", timeout.description)
        self.assertEqual(timeout.table, "fold runtime")
        os.environ["FOLD_TIMEOUT"] = "7"
        os.environ["FOLD_CODEC"] = "zip"
        try:
            settings = fold.config()
        finally:
            del os.environ["FOLD_TIMEOUT"], os.environ["FOLD_CODEC"]
        self.assertEqual((settings["FOLD_TIMEOUT"].value, settings["FOLD_TIMEOUT"].from_env),
                         ("7", True))
        self.assertTrue(settings["FOLD_TIMEOUT"].valid)
        self.assertFalse(settings["FOLD_CODEC"].valid)
        # every variable fold_info -c prints is there, none twice
        printed = [line.split("=")[0] for line in fold.info("-c").splitlines()
                   if line.startswith("FOLD_")]
        self.assertEqual(sorted(printed), sorted(settings))

    def test_info_lists_algorithms(self):
        self.assertIn("recursive_doubling", fold.info("-a"))

    def test_launcher_fills_only_what_is_unset(self):
        env = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4",
               "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
               "PMIX_NAMESPACE": "prterun-host-123@1", "WORLD_SIZE": "4"}
        launcher.fill_torch_env(env)
        self.assertEqual((env["RANK"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]),
                         ("1", "1", "4"))
        self.assertEqual(env["MASTER_ADDR"], "127.0.0.1")
        port = int(env["MASTER_PORT"])
        self.assertTrue(20000 <= port < 40000)
        other = dict(env, OMPI_COMM_WORLD_RANK="3", RANK="3")
        del other["MASTER_PORT"]
        launcher.fill_torch_env(other)
        self.assertEqual(int(other["MASTER_PORT"]), port)   # every rank of the job alike

    def test_launcher_leaves_other_launches_and_nodes_alone(self):
        env = {"MASTER_ADDR": "10.0.0.1"}
        launcher.fill_torch_env(env)
        self.assertEqual(env, {"MASTER_ADDR": "10.0.0.1"})
        two_nodes = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4",
                     "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "PMIX_NAMESPACE": "job"}
        launcher.fill_torch_env(two_nodes)
        self.assertNotIn("MASTER_ADDR", two_nodes)
        self.assertEqual(two_nodes["RANK"], "0")

    def test_blocking_max_takes_folds_size_syntax(self):
        from fold.torch_backend import _blocking_max
        for text, value in (("2048", 2048), ("64k", 65536), ("2KiB", 2048), ("1M", 1 << 20),
                            ("inf", 2 ** 64 - 1)):
            os.environ["FOLD_TORCH_BLOCKING_MAX"] = text
            self.assertEqual(_blocking_max(), value)
        os.environ["FOLD_TORCH_BLOCKING_MAX"] = "lots"
        with self.assertRaises(ValueError):
            _blocking_max()
        del os.environ["FOLD_TORCH_BLOCKING_MAX"]
        self.assertEqual(_blocking_max(), 2048)

    def test_backend_registered(self):
        if not fold.backend_available:
            self.skipTest("fold's torch backend is not built or torch is missing")
        import torch.distributed as dist
        self.assertEqual(dist.Backend("fold"), "fold")
        self.assertTrue(fold.register_backend())   # a second call is harmless


if __name__ == "__main__":
    unittest.main(verbosity=2)
