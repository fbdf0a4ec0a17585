import Decisions
import Testing

/// serve's per-connection bounds (issue 53, point 1), decided without a socket.
@Suite("A connection's bounds, decided")
struct ConnectionGuardStateTests {
    static func state(pipelined: Int = 3) -> ConnectionGuardState {
        var bounds = ConnectionBounds()
        bounds.maximumPipelinedRequests = pipelined
        return ConnectionGuardState(bounds: bounds)
    }

    @Test func aKeepAliveClientAnsweredInTurnIsNeverClosed() {
        var state = Self.state(pipelined: 1)
        for _ in 0..<1_000 {
            #expect(state.requestHead() == .startRequestTimer)
            #expect(state.requestEnd() == .cancelRequestTimer)
            #expect(state.answerEnd() == .none)
        }
        #expect(!state.closed)
        #expect(state.outstanding == 0)
    }

    @Test func oneRequestMoreThanTheBoundUnansweredClosesTheConnectionOnceAndNothingAfter() {
        var state = Self.state(pipelined: 3)
        for _ in 0..<3 {
            #expect(state.requestHead() == .startRequestTimer)
            #expect(state.requestEnd() == .cancelRequestTimer)
        }
        #expect(state.requestHead() == .close(.pipelined))
        #expect(state.closed)
        #expect(state.requestHead() == .none)
        #expect(state.timerFired(.writeTimeout) == .none)
        #expect(state.writabilityChanged(isWritable: false) == .none)
    }

    @Test func answersWrittenMakeRoomForMorePipelinedRequests() {
        var state = Self.state(pipelined: 2)
        _ = state.requestHead()
        _ = state.requestEnd()
        _ = state.requestHead()
        _ = state.requestEnd()
        _ = state.answerEnd()
        #expect(state.requestHead() == .startRequestTimer)
        #expect(!state.closed)
    }

    @Test func aRequestNotWholeInTimeAndAnAnswerUnreadInTimeClose() {
        var slow = Self.state()
        #expect(slow.requestHead() == .startRequestTimer)
        #expect(slow.timerFired(.requestTimeout) == .close(.requestTimeout))

        var unread = Self.state()
        #expect(unread.writabilityChanged(isWritable: false) == .startWriteTimer)
        #expect(unread.writabilityChanged(isWritable: true) == .cancelWriteTimer)
        #expect(unread.writabilityChanged(isWritable: false) == .startWriteTimer)
        #expect(unread.timerFired(.writeTimeout) == .close(.writeTimeout))
        #expect(unread.closed)
    }

    @Test func anEndWithoutAHeadChangesNothing() {
        var state = Self.state()
        #expect(state.requestEnd() == .none)
        #expect(state.answerEnd() == .none)
        #expect(state.outstanding == 0)
    }
}

/// serve's log of answers anyone can cause (issue 53, point 3): one line per kind and interval.
@Suite("Throttled log lines")
struct LogThrottleTests {
    @Test func theFirstIsLoggedThenOneLinePerIntervalSayingHowManyItStandsFor() {
        var throttle = LogThrottle(interval: .seconds(10))
        let start = ContinuousClock.now
        #expect(throttle.note("rejected", at: start) == 0)
        for second in 1...9 { #expect(throttle.note("rejected", at: start + .seconds(second)) == nil) }
        #expect(throttle.note("overloaded", at: start + .seconds(9)) == 0, "another kind has its own line")
        #expect(throttle.note("rejected", at: start + .seconds(10)) == 9)
        #expect(throttle.note("rejected", at: start + .seconds(11)) == nil)
        #expect(throttle.note("rejected", at: start + .seconds(30)) == 1)
    }
}

/// Issue 67, point 1: a request that asks to leave HTTP/1.1 is refused from its head.
@Suite("A protocol switch refused from its head")
struct ProtocolSwitchTests {
    @Test func anUpgradeFieldOnAnyMethodAndACONNECTAreSwitchesAndNothingElseIs() {
        #expect(ProtocolSwitch(method: "GET", hasUpgradeField: true) == .upgrade)
        #expect(ProtocolSwitch(method: "POST", hasUpgradeField: true) == .upgrade)
        #expect(ProtocolSwitch(method: "CONNECT", hasUpgradeField: false) == .connect)
        #expect(ProtocolSwitch(method: "CONNECT", hasUpgradeField: true) == .connect)
        #expect(ProtocolSwitch(method: "GET", hasUpgradeField: false) == nil)
        #expect(ProtocolSwitch(method: "POST", hasUpgradeField: false) == nil)
        #expect(ProtocolSwitch.upgrade.status == 400)
        #expect(ProtocolSwitch.connect.status == 405)
    }

    @Test func aSwitchRefusesAndClosesOnceAndNothingIsDecidedAfter() {
        for switching in ProtocolSwitch.allCases {
            var state = ConnectionGuardStateTests.state(pipelined: 3)
            #expect(state.requestHead() == .startRequestTimer)
            #expect(state.requestEnd() == .cancelRequestTimer)
            #expect(state.answerEnd() == .none)
            #expect(state.requestHead(switching: switching) == .refuse(switching))
            #expect(state.closed)
            // Whatever the client sends or the timers do next: nothing more.
            #expect(state.requestHead() == .none)
            #expect(state.requestHead(switching: switching) == .none)
            #expect(state.requestEnd() == .none)
            #expect(state.timerFired(.requestTimeout) == .none)
            #expect(state.writabilityChanged(isWritable: false) == .none)
        }
    }

    @Test func aSwitchAsTheFirstRequestIsRefusedWithoutCountingAsPipelined() {
        var state = ConnectionGuardStateTests.state(pipelined: 1)
        #expect(state.requestHead(switching: .connect) == .refuse(.connect))
        #expect(state.outstanding == 0)
    }
}

extension ProtocolSwitchTests {
    /// A switch pipelined behind a request not yet answered: reading stops at once, and no
    /// refusal is decided (it would read as the answer to the earlier request).
    @Test func aSwitchBehindAnUnansweredRequestStopsReadingAndRefusesNothing() {
        var state = ConnectionGuardStateTests.state(pipelined: 4)
        _ = state.requestHead()
        _ = state.requestEnd()
        _ = state.requestHead()
        _ = state.requestEnd()
        #expect(state.requestHead(switching: .upgrade) == .stopReading(.upgrade))
        #expect(state.closed)
        #expect(state.requestHead() == .none)
        #expect(state.answerEnd() == .none)
        #expect(state.answerEnd() == .none)
    }

    @Test func aClientThatReadsNoneOfTheEarlierAnswersIsStillClosedByTheWriteTimer() {
        var state = ConnectionGuardStateTests.state(pipelined: 4)
        _ = state.requestHead()
        _ = state.requestEnd()
        #expect(state.requestHead(switching: .connect) == .stopReading(.connect))
        #expect(state.writabilityChanged(isWritable: false) == .startWriteTimer)
        #expect(state.timerFired(.writeTimeout) == .close(.writeTimeout))
        #expect(state.timerFired(.writeTimeout) == .none)
    }
}
