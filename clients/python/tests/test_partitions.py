"""A partitioned journal's subjects without a server: the tenant's partition and what follow reads."""

from __future__ import annotations

import unittest

from toolgate_client import Client, ToolgateError, journal_partition_of


class JournalPartitions(unittest.TestCase):
    def test_the_partition_is_the_one_the_services_and_nats_server_compute(self) -> None:
        # Known answers of `journalPartitionOf` in @toolgate/contracts, which a spec holds equal to
        # nats-server's {{partition(n, tenant)}} on a real server.
        for tenant, count, partition in [
            ("acme", 4, 3),
            ("team-0", 4, 1),
            ("team-1", 4, 2),
            ("a", 64, 44),
            ("tenant_with-UPPER", 7, 6),
            ("x" * 64, 3, 2),
        ]:
            self.assertEqual(journal_partition_of(tenant, count), partition, tenant)

    def test_follow_reads_the_tenants_partition(self) -> None:
        one = Client(None, "t", "acme", "toolgate", 1.0)  # type: ignore[arg-type]
        self.assertEqual(one.journal_subject("run-1"), "toolgate.journal.acme.run-1.>")
        four = Client(None, "t", "acme", "toolgate", 1.0, journal_partitions=4)  # type: ignore[arg-type]
        self.assertEqual(four.journal_subject("run-1"), "toolgate.journal.3.acme.run-1.>")
        with self.assertRaises(ToolgateError) as bad:
            four.journal_subject("run.1")
        self.assertEqual(bad.exception.code, "invalid-request")


class ConnectRefusesABadCount(unittest.IsolatedAsyncioTestCase):
    async def test_out_of_range_is_a_config_error_before_connecting(self) -> None:
        for count in (0, 65, 2.5):
            with self.assertRaises(ToolgateError) as bad:
                await Client.connect("t", "acme", url="nats://127.0.0.1:1", journal_partitions=count)  # type: ignore[arg-type]
            self.assertEqual(bad.exception.code, "config")


if __name__ == "__main__":
    unittest.main()
