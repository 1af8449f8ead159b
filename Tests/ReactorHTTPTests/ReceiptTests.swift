import ReactorCore
import Testing
@testable import ReactorHTTP

@Suite struct ReceiptTests {
    @Test func anActionsReceiptIsItsSequenceInJSONWithNoSpareRoom() {
        for sequence: UInt64 in [1, 9, 10, 1_234_567_890_123, .max] {
            let json = ReactorService.receiptJSON(ActionReceipt(sequence: sequence))
            #expect(json == Array("{\"seq\":\(sequence)}".utf8))
            #expect(json.capacity <= json.count + 16)
        }
    }
}
