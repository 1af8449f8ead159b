import Foundation

/// The file `--address-file` names: written whole or not at all (a new file renamed over it),
/// so a health check never reads half an address.
enum AddressFile {
    static func write(_ text: String, to path: String) throws {
        let temporary = path + ".\(getpid()).tmp"
        try Data((text + "\n").utf8).write(to: URL(fileURLWithPath: temporary))
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
    }
}
