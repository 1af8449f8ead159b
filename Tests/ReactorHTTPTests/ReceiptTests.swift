import ReactorCore
import ReactorHosting
import Testing

@testable import ReactorHTTP

/// How much more than asked an exact allocation may hold: glibc rounds a request up to 16 bytes
/// and hands out a whole free chunk when what would be left of it is below its 32-byte minimum.
/// Reserving spare room on purpose (64 bytes or more) still shows.
let mallocSlack = 48

@Suite struct ReceiptTests {
    @Test func anActionsReceiptIsItsSequenceInJSONWithNoSpareRoom() {
        for sequence: UInt64 in [1, 9, 10, 1_234_567_890_123, .max] {
            let json = ReactorService.receiptJSON(ActionReceipt(sequence: sequence))
            #expect(json == Array("{\"seq\":\(sequence)}".utf8))
            #expect(json.capacity <= json.count + mallocSlack)
        }
    }
}

@Suite struct ServerSentEventsTests {
    @Test func aStatesEventCarriesItsVersionAndJSONWithNoSpareRoom() {
        for version: UInt64 in [0, 9, 10, 1_234_567_890_123, .max] {
            let event = ServerSentEvents.stateEvent(version: version, json: Array(#"{"a":1}"#.utf8))
            #expect(event == Array("id: \(version)\nevent: state\ndata: {\"a\":1}\n\n".utf8))
            #expect(event.capacity <= event.count + mallocSlack)
        }
    }
}

@Suite struct LoggedPathTests {
    @Test func logsNeverShowAnInstanceID() {
        let id = "AbCdEfGhIjKlMnOpQrStUv"
        let logged = ReactorService.loggable(path: "/reactors/\(id)/actions")
        #expect(!logged.contains(id))
        #expect(logged == "/reactors/\(ReactorHosting.InstanceID.logLabel(id))/actions")
        #expect(ReactorService.loggable(path: "/reactors") == "/reactors")
        #expect(ReactorService.loggable(path: "/types") == "/types")
        #expect(ReactorService.loggable(path: "/no/such/route") == "/no/such/route")
        // Forms of a path that route elsewhere or nowhere, or route only once decoded: the id is
        // hidden in each, and only the id.
        let encoded = "%41" + id.dropFirst()
        for (path, hidden) in [
            ("//reactors/\(id)", id), ("/%72eactors/\(id)/events", id), ("http://host/reactors/\(id)", id),
            ("/x/../reactors/\(id)", id), ("/REACTORS/\(id)", id), ("/reactors//\(id)", id),
            ("/reactors/\(encoded)", encoded), ("/reactors/\(id)x/actions", id + "x"),
        ] {
            let logged = ReactorService.loggable(path: path)
            #expect(!logged.contains(id.dropFirst()), "\(path) logged as \(logged)")
            #expect(logged == path.replacingOccurrences(of: hidden, with: ReactorHosting.InstanceID.logLabel(hidden)))
        }
    }
}
