import Foundation
import Locking
import ReactorCore

/// A process-wide chat room shared by every ``RoomReactor``: the global state of the room
/// example. Use ``shared`` in the server and a fresh `Room()` in tests.
///
/// Messages travel through a ``ClusterChannel``: with one that spans nodes, a message said on
/// any node reaches the room on every node, each in the same order. Members are each node's own:
/// a node lists the members it serves.
public final class Room: Sendable {
    /// One message said in the room.
    public struct Message: Codable, Sendable, Equatable {
        /// Increasing per room.
        public let id: UInt64
        /// The speaker's name when it was said.
        public let author: String
        /// What was said.
        public let text: String
    }

    /// Someone in the room.
    public struct Member: Codable, Sendable, Equatable {
        /// Assigned when joining.
        public let id: UInt64
        /// The display name.
        public var name: String
    }

    /// A change in the room, as every member's stream delivers it.
    public enum Event: Sendable, Equatable {
        /// The whole room: the first event of every stream.
        case snapshot(messages: [Message], members: [Member])
        /// A new message.
        case message(Message)
        /// The member list changed.
        case members([Member])
    }

    private struct Storage {
        var messages: [Message] = []
        var members: [Member] = []
        var subscribers: [UInt64: AsyncStream<Event>.Continuation] = [:]
        var lastID: UInt64 = 0

        mutating func nextID() -> UInt64 {
            lastID += 1
            return lastID
        }
    }

    /// The room every instance of the server shares.
    public static let shared = Room()

    /// How many messages the room keeps.
    public let historyLimit: Int
    private let storage = Locked(Storage())

    /// An empty room that keeps the last `historyLimit` messages, said through `channel` (by
    /// default, within this process).
    public init(historyLimit: Int = 100, channel: any ClusterChannel = LocalChannel()) {
        self.historyLimit = historyLimit
        self.channel = channel
        channel.subscribe { [weak self] bytes in
            guard let said = try? JSONDecoder().decode(Said.self, from: Data(bytes)) else { return }
            self?.hear(said)
        }
    }

    /// A message as it travels through the channel, before the room numbers it.
    private struct Said: Codable {
        let author: String
        let text: String
    }

    private let channel: any ClusterChannel

    /// A stream of the room's changes, starting with a snapshot of the whole room.
    /// It ends when the consumer stops iterating.
    public func events() -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream.makeStream(of: Event.self)
        let id = storage.withLock { storage in
            let id = storage.nextID()
            storage.subscribers[id] = continuation
            continuation.yield(.snapshot(messages: storage.messages, members: storage.members))
            return id
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.storage.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Adds a member called `name`; returns its id.
    public func join(name: String) -> UInt64 {
        change { storage in
            let id = storage.nextID()
            storage.members.append(Member(id: id, name: name))
            return (.members(storage.members), id)
        }.result
    }

    /// Renames a member; nothing happens for an unknown id.
    public func rename(member id: UInt64, to name: String) {
        change { storage in
            guard let index = storage.members.firstIndex(where: { $0.id == id }) else { return nil }
            storage.members[index].name = name
            return .members(storage.members)
        }
    }

    /// Removes a member; nothing happens for an unknown id.
    public func leave(member id: UInt64) {
        change { storage in
            guard let index = storage.members.firstIndex(where: { $0.id == id }) else { return nil }
            storage.members.remove(at: index)
            return .members(storage.members)
        }
    }

    /// Says `text` as the member `id` (under its current name) to everyone in the room, on
    /// every node the channel reaches.
    public func say(_ text: String, from id: UInt64) {
        let author = storage.withLock { storage in storage.members.first { $0.id == id }?.name } ?? "someone"
        // Sorted keys, so that equal messages travel as equal bytes.
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        guard let bytes = try? encoder.encode(Said(author: author, text: text)) else { return }
        channel.publish(Array(bytes))
    }

    /// A message heard from the channel (said on this node or another): numbered, kept and sent
    /// to every member here.
    private func hear(_ said: Said) {
        change { storage in
            let message = Message(id: storage.nextID(), author: said.author, text: said.text)
            storage.messages.append(message)
            storage.messages.removeFirst(max(0, storage.messages.count - historyLimit))
            return .message(message)
        }
    }

    /// The members now in the room.
    public var members: [Member] { storage.withLock { $0.members } }

    /// Applies a change under the lock and sends the event it returns to every subscriber,
    /// in the order of the changes.
    @discardableResult
    private func change<Result>(_ body: (inout Storage) -> (Event?, Result)) -> (event: Event?, result: Result) {
        storage.withLock { storage in
            let (event, result) = body(&storage)
            if let event {
                for continuation in storage.subscribers.values { continuation.yield(event) }
            }
            return (event, result)
        }
    }

    @discardableResult
    private func change(_ body: (inout Storage) -> Event?) -> Event? {
        change { storage in (body(&storage), ()) }.event
    }
}
