// actorbus.js: the JavaScript client of actorbus's J.REP gateway.
//
// This is a placeholder: the client is not written yet.  The gateway serves
// this file at /actorbus.js; the protocol it will speak is described in
// docs/jrep.md.
