package server

import (
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// errWrongPassword answers an account change whose current password is
// wrong: 403, not 401, since the session itself is fine.
var errWrongPassword = fault.Errorf(fault.Forbidden, "the current password is wrong")

// totpIssuer names the service in authenticator apps.
const totpIssuer = "Tally"

// changePassword takes {current_password, new_password}: the password is
// replaced and every other session of the user ends; 204.
//
// POST /v1/auth/password
func (s *Server) changePassword(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	si, err := s.session(r)
	if err != nil {
		return err
	}
	body, err := decodeObject(w, r, authBodyLimit)
	if err != nil {
		return err
	}
	current, err := body.str("current_password", fault.InvalidPassword)
	if err != nil {
		return err
	}
	next, err := body.str("new_password", fault.InvalidPassword)
	if err != nil {
		return err
	}
	if !storage.CheckPassword(si.user, current) {
		return errWrongPassword
	}
	if err := s.db.ChangePassword(r.Context(), si.user, next, si.session.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// resetPassword takes {token, password}: a password link's token (from
// `tally user reset-password` or `tally user add`) sets the password, once,
// before it expires, and ends every session of the user; 204. No sign-in
// needed: the token is the credential.
//
// POST /v1/auth/password-reset
func (s *Server) resetPassword(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	body, err := decodeObject(w, r, authBodyLimit)
	if err != nil {
		return err
	}
	token, err := body.str("token", fault.InvalidToken)
	if err != nil {
		return err
	}
	password, err := body.str("password", fault.InvalidPassword)
	if err != nil {
		return err
	}
	if _, err := s.db.ResetPassword(r.Context(), token, password); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// enrolTOTP draws a two-factor secret for the signed-in user, pending until
// confirmed: 200 {secret, uri}, shown this once.
//
// POST /v1/auth/totp
func (s *Server) enrolTOTP(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	si, err := s.session(r)
	if err != nil {
		return err
	}
	secret, uri, err := s.db.BeginTOTP(r.Context(), si.user, totpIssuer)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, totpEnrolment{Secret: secret, URI: uri})
	return nil
}

// confirmTOTP takes {code}, a code of the pending secret: from then on
// sign-in asks for a code; 204.
//
// POST /v1/auth/totp/confirm
func (s *Server) confirmTOTP(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	si, err := s.session(r)
	if err != nil {
		return err
	}
	body, err := decodeObject(w, r, authBodyLimit)
	if err != nil {
		return err
	}
	code, err := body.str("code", fault.InvalidTOTP)
	if err != nil {
		return err
	}
	if err := s.db.ConfirmTOTP(r.Context(), si.user, strings.TrimSpace(code)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// disableTOTP takes {password, code} and turns two-factor sign-in off; 204.
//
// POST /v1/auth/totp/disable
func (s *Server) disableTOTP(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	si, err := s.session(r)
	if err != nil {
		return err
	}
	body, err := decodeObject(w, r, authBodyLimit)
	if err != nil {
		return err
	}
	password, err := body.str("password", fault.InvalidPassword)
	if err != nil {
		return err
	}
	code, err := body.str("code", fault.InvalidTOTP)
	if err != nil {
		return err
	}
	if !storage.CheckPassword(si.user, password) {
		return errWrongPassword
	}
	if err := s.db.DisableTOTP(r.Context(), si.user, strings.TrimSpace(code)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
