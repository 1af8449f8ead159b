import Foundation
import TestSupport
import Testing

@testable import MicroHTTP

/// The cgroup CPU quota caps the default thread counts; each case lays out the files a kernel
/// would show under a directory of its own.
@Suite struct ProcessorCountTests {
    /// The roots, removed once the test ends.
    private let scratch: ScratchDirectory

    init() throws {
        scratch = try ScratchDirectory("cgroup")
    }

    /// A file system root with `files` (paths relative to it) written.
    private func root(_ files: [String: String]) throws -> String {
        let root = scratch.url.appendingPathComponent(UUID().uuidString)
        for (path, contents) in files {
            let url = root.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            // Not `atomically`: on Linux Foundation leaves the directory it writes aside in.
            try contents.write(to: url, atomically: false, encoding: .utf8)
        }
        return root.path
    }

    @Test func cgroupV2QuotaInWholeProcessorsRoundedUp() throws {
        #expect(
            ProcessorCount.cgroupQuota(
                root: try root([
                    "proc/self/cgroup": "0::/\n",
                    "sys/fs/cgroup/cpu.max": "200000 100000\n",
                ])) == 2)
        #expect(
            ProcessorCount.cgroupQuota(
                root: try root([
                    "proc/self/cgroup": "0::/\n",
                    "sys/fs/cgroup/cpu.max": "150000 100000\n",
                ])) == 2)
        #expect(
            ProcessorCount.cgroupQuota(
                root: try root([
                    "proc/self/cgroup": "0::/\n",
                    "sys/fs/cgroup/cpu.max": "10000 100000\n",
                ])) == 1)
        #expect(
            ProcessorCount.cgroupQuota(
                root: try root([
                    "proc/self/cgroup": "0::/\n",
                    "sys/fs/cgroup/cpu.max": "max 100000\n",
                ])) == nil)
    }

    @Test func cgroupV1QuotaOverPeriod() throws {
        let limited = try root([
            "proc/self/cgroup": "2:cpuacct:/\n1:cpu:/\n",
            "sys/fs/cgroup/cpu/cpu.cfs_quota_us": "300000\n",
            "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
        ])
        #expect(ProcessorCount.cgroupQuota(root: limited) == 3)
        let unlimited = try root([
            "proc/self/cgroup": "1:cpu,cpuacct:/\n",
            "sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n",
            "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
        ])
        #expect(ProcessorCount.cgroupQuota(root: unlimited) == nil)
    }

    @Test func theProcessOwnCgroupAndItsParentsCountTheSmallestWinning() throws {
        // The process sits in /app/worker; /app allows 4 CPUs, the worker 6, the root none.
        let v2 = try root([
            "proc/self/cgroup": "0::/app/worker\n",
            "sys/fs/cgroup/cpu.max": "max 100000\n",
            "sys/fs/cgroup/app/cpu.max": "400000 100000\n",
            "sys/fs/cgroup/app/worker/cpu.max": "600000 100000\n",
        ])
        #expect(ProcessorCount.cgroupQuota(root: v2) == 4)
        // cgroup v1 with the container's own cgroup mounted as the root: the path in
        // /proc/self/cgroup is the host's and does not exist below the mount.
        let v1 = try root([
            "proc/self/cgroup": "4:cpu,cpuacct:/docker/abc123\n",
            "sys/fs/cgroup/cpu/cpu.cfs_quota_us": "200000\n",
            "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
        ])
        #expect(ProcessorCount.cgroupQuota(root: v1) == 2)
    }

    @Test func noCgroupFilesMeansNoQuota() throws {
        #expect(ProcessorCount.cgroupQuota(root: try root(["proc/self/cgroup": "0::/\n"])) == nil)
        #expect(ProcessorCount.cgroupQuota(root: try root([:])) == nil)
    }

    @Test func affinityFromTheAllowedList() throws {
        #expect(ProcessorCount.affinityCount(root: try root(["proc/self/status": "Name:\tx\nCpus_allowed_list:\t0-3,8\n"])) == 5)
        #expect(ProcessorCount.affinityCount(root: try root(["proc/self/status": "Cpus_allowed_list:\t1\n"])) == 1)
        #expect(ProcessorCount.affinityCount(root: try root([:])) == nil)
    }

    @Test func theDefaultCountsAreAtMostTheProcessorsOnline() {
        let online = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        #expect((1...online).contains(HTTPServerConfiguration.activeProcessorCount))
        #expect(HTTPServerConfiguration().threads == HTTPServerConfiguration.activeProcessorCount)
    }
}
