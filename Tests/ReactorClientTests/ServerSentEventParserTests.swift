import Testing

@testable import ReactorClient

struct ServerSentEventParserTests {
    /// The server's own framing: the retry block, a snapshot-marked state, an error, the end.
    static let stream = """
        retry: 3000

        : snapshot
        id: 7
        event: state
        data: {"value":1}

        : heartbeat

        event: error
        data: {"action":3}

        event: end
        data: {"reason":"deleted"}


        """

    static let expected = [
        ServerSentEvent(id: "7", name: "state", data: #"{"value":1}"#, isSnapshot: true),
        ServerSentEvent(name: "error", data: #"{"action":3}"#),
        ServerSentEvent(name: "end", data: #"{"reason":"deleted"}"#),
    ]

    @Test func readsTheServersEvents() {
        var parser = ServerSentEventParser()
        #expect(parser.feed(Array(Self.stream.utf8)) == Self.expected)
        #expect(parser.retryMilliseconds == 3000)
    }

    @Test(arguments: [1, 2, 3, 5, 7, 64])
    func chunksSplitAnywhereGiveTheSameEvents(size: Int) {
        var parser = ServerSentEventParser()
        let bytes = Array(Self.stream.utf8)
        var events: [ServerSentEvent] = []
        for start in stride(from: 0, to: bytes.count, by: size) {
            events += parser.feed(bytes[start..<min(start + size, bytes.count)])
        }
        #expect(events == Self.expected)
    }

    @Test(arguments: ["\r\n", "\r"])
    func linesMayEndInCRLFOrCR(ending: String) {
        var parser = ServerSentEventParser()
        let text = Self.stream.replacingOccurrences(of: "\n", with: ending)
        // A CRLF split between two chunks is one line end, not two.
        let bytes = Array(text.utf8)
        let middle = bytes.firstIndex(of: 0x0D).map { $0 + 1 } ?? 0
        let events = parser.feed(bytes[..<middle]) + parser.feed(bytes[middle...])
        #expect(events == Self.expected)
    }

    @Test func dataLinesJoinAndFieldsFollowTheSpec() {
        var parser = ServerSentEventParser()
        let events = parser.feed(Array("\u{FEFF}data:first\ndata:  second\nid\nunknown: x\nretry: soon\n\nevent: lonely\n\n".utf8))
        #expect(events == [ServerSentEvent(id: "", data: "first\n second")])
        #expect(parser.retryMilliseconds == nil)
    }

    @Test func anUnfinishedEventIsNotDispatched() {
        var parser = ServerSentEventParser()
        #expect(parser.feed(Array("id: 1\nevent: state\ndata: {}\n".utf8)).isEmpty)
        #expect(parser.feed(Array("\n".utf8)) == [ServerSentEvent(id: "1", name: "state", data: "{}")])
    }
}
