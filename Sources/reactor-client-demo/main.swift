import Foundation
import ReactorClient
import ReactorExamples

/// `reactor-client-demo [BASE_URL] [INCREASES]`: creates a counter on the server (by default
/// `make run`'s http://127.0.0.1:8080), prints its states as they stream, sends increases one
/// after the other, then deletes the counter and prints why its stream ended.
let arguments = CommandLine.arguments.dropFirst()
guard let server = URL(string: arguments.first ?? "http://127.0.0.1:8080") else {
    FileHandle.standardError.write(Data("usage: reactor-client-demo [BASE_URL] [INCREASES]\n".utf8))
    exit(2)
}
let increases = arguments.dropFirst().first.flatMap(Int.init) ?? 3

do {
    let counter = try await RemoteReactor<CounterReactor>.create(type: "counter", at: server)
    print("created counter \(counter.id) on \(server)")

    let printer = Task {
        for await state in counter.states {
            let alert = state.state.alertMessage.map { " alert \"\($0)\"" } ?? ""
            print("version \(state.version): value \(state.state.value)\(state.state.isLoading ? " (loading)" : "")\(alert)")
        }
        print("stream ended: \(counter.endReason?.rawValue ?? "cancelled")")
    }

    for _ in 0..<increases {
        let settled = try await counter.send(.increase, andWait: true)
        print("increase settled at version \(settled.version)")
    }
    try await counter.delete()
    await printer.value
} catch {
    FileHandle.standardError.write(Data("reactor-client-demo: \(error)\n".utf8))
    exit(1)
}
