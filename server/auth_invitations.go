package server

import (
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/tally-analytics/tally/fault"
	"github.com/tally-analytics/tally/storage"
)

// Lifetimes of links (docs/accounts.md#links).
const (
	invitationTTL  = 7 * 24 * time.Hour
	resetLinkTTL   = time.Hour
	setPasswordTTL = 24 * time.Hour
)

// Dashboard paths that take a link's token; in the URL's fragment, so
// that it is sent to no server, logged nowhere and leaks in no Referer.
const (
	invitationPath = "/v1/ui/#invite="
	passwordPath   = "/v1/ui/#password="
)

// invitationSender is the seam of invitations by email: today none is
// set, and the link is handed to whoever invited (docs/accounts.md#invitations);
// once SMTP is configured, a sender mails it.
type invitationSender interface {
	SendInvitation(ws *storage.Workspace, inv *storage.Invitation, path string) error
}

// requireMemberManager is the check of member management: the admin token,
// an unrestricted admin key of the workspace, or a signed-in owner (admin
// too, when adminMay).
func requireMemberManager(p principal, ws *storage.Workspace, adminMay bool) error {
	switch role := p.role(ws.ID); {
	case p.admin:
		return nil
	case p.session != nil:
		if role == storage.RoleOwner || (adminMay && role == storage.RoleAdmin) {
			return nil
		}
		return fault.Errorf(fault.Forbidden, "managing members needs the owner role in this workspace")
	case p.key.Restricted():
		return fault.Errorf(fault.Forbidden, "members reach every site of the workspace, so a key restricted to sites cannot manage them")
	}
	return nil
}

// memberWorkspace is the workspace of the route's :slug for a member
// management request, refused unless requireMemberManager allows p.
func (s *Server) memberWorkspace(r *http.Request, ps httprouter.Params, adminMay bool) (principal, *storage.Workspace, error) {
	p, ws, err := s.workspace(r, ps.ByName("slug"), storage.ScopeAdmin)
	if err != nil {
		return p, nil, err
	}
	return p, ws, requireMemberManager(p, ws, adminMay)
}

// createInvitation takes {email, role} and answers 201 with the invitation
// and its link's token, shown this once. Owners and admins invite (an
// admin not as owner), as do the admin token and admin keys.
//
// POST /v1/workspaces/:slug/invitations
func (s *Server) createInvitation(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, ws, err := s.memberWorkspace(r, ps, true)
	if err != nil {
		return err
	}
	body, err := decodeObject(w, r, authBodyLimit)
	if err != nil {
		return err
	}
	email, err := body.str("email", fault.InvalidEmail)
	if err != nil {
		return err
	}
	role, err := body.str("role", fault.InvalidRole)
	if err != nil {
		return err
	}
	if role == storage.RoleOwner && p.session != nil && p.role(ws.ID) != storage.RoleOwner {
		return fault.Errorf(fault.Forbidden, "only an owner can invite an owner")
	}
	inv, token, err := s.db.CreateInvitation(r.Context(), p.actor(), ws, email, role, invitationTTL)
	if err != nil {
		return err
	}
	if s.invitations != nil {
		if err := s.invitations.SendInvitation(ws, inv, invitationPath+token); err != nil {
			s.log.Warn("send an invitation", "err", err.Error())
		}
	}
	writeJSON(w, http.StatusCreated, createdInvitation{invitationInfo: invitationInfoOf(inv), Token: token, Path: invitationPath + token})
	return nil
}

// listInvitations answers the workspace's invitations still open.
//
// GET /v1/workspaces/:slug/invitations
func (s *Server) listInvitations(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, ws, err := s.memberWorkspace(r, ps, true)
	if err != nil {
		return err
	}
	list, err := s.db.Invitations(r.Context(), ws.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, invitationList{Invitations: rowsOf(list, invitationInfoOf)})
	return nil
}

// revokeInvitation withdraws an open invitation; 204, and its link then
// answers as an unknown one. Owners and admins (an admin not an
// invitation as owner, 403), the admin token and admin keys; 404 for an
// invitation accepted, expired, unknown or of another workspace.
//
// DELETE /v1/workspaces/:slug/invitations/:id
func (s *Server) revokeInvitation(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, ws, err := s.memberWorkspace(r, ps, true)
	if err != nil {
		return err
	}
	mayOwner := p.session == nil || p.role(ws.ID) == storage.RoleOwner
	if err := s.db.RevokeInvitation(r.Context(), p.actor(), ws, ps.ByName("id"), mayOwner); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// acceptInvitation takes {token, password?}. Signed in, the invitation's
// role is added to the user (CSRF checks apply); otherwise a new user with
// the invited email and password is created and signed in. 200 with the
// session's answer.
//
// POST /v1/auth/invitations/accept
func (s *Server) acceptInvitation(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var si *signedIn
	if s.sessionCookie(r) != "" {
		var err error
		if si, err = s.session(r); err != nil {
			return err
		}
	} else if !sameOrigin(r, false) {
		return errCrossOrigin
	}
	body, err := decodeObject(w, r, authBodyLimit)
	if err != nil {
		return err
	}
	token, err := body.str("token", fault.InvalidToken)
	if err != nil {
		return err
	}
	password := ""
	var user *storage.User
	if si != nil {
		user = si.user
	} else if password, err = body.str("password", fault.InvalidPassword); err != nil {
		return err
	}
	u, _, err := s.db.AcceptInvitation(r.Context(), token, user, password)
	if err != nil {
		return err
	}
	if si == nil {
		sess, cookie, err := s.db.CreateSession(r.Context(), u, s.limits())
		if err != nil {
			return err
		}
		s.setSessionCookie(w, cookie)
		si = &signedIn{user: u, session: sess, token: cookie}
	}
	ans, err := s.sessionAnswerOf(r.Context(), si)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ans)
	return nil
}

// listMembers answers the workspace's users and roles.
//
// GET /v1/workspaces/:slug/members
func (s *Server) listMembers(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	_, ws, err := s.memberWorkspace(r, ps, true)
	if err != nil {
		return err
	}
	list, err := s.db.Members(r.Context(), ws.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, memberList{Members: rowsOf(list, memberOf)})
	return nil
}

// removeMember takes a user's role in the workspace away; 204. Owners
// only (and the admin token, admin keys).
//
// DELETE /v1/workspaces/:slug/members/:userId
func (s *Server) removeMember(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, ws, err := s.memberWorkspace(r, ps, false)
	if err != nil {
		return err
	}
	if err := s.db.RemoveMember(r.Context(), p.actor(), ws, ps.ByName("userId")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// updateMember takes {role} and gives it to the member; 200 with the
// member. Owners only (and the admin token, admin keys); 409 last_owner
// when it would leave the workspace without an owner.
//
// PATCH /v1/workspaces/:slug/members/:userId
func (s *Server) updateMember(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, ws, err := s.memberWorkspace(r, ps, false)
	if err != nil {
		return err
	}
	body, err := decodeObject(w, r, authBodyLimit)
	if err != nil {
		return err
	}
	role, err := body.str("role", fault.InvalidRole)
	if err != nil {
		return err
	}
	m, err := s.db.SetMemberRole(r.Context(), p.actor(), ws, ps.ByName("userId"), role)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, memberOf(m))
	return nil
}

// createUser takes {email, role, workspace, password?}: the operator's
// command `tally user add`. Without a password the answer carries a
// set-password link (24 hours, single use). Admin token only.
//
// POST /v1/users
func (s *Server) createUser(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p, err := s.requireAdminToken(r)
	if err != nil {
		return err
	}
	body, err := decodeObject(w, r, authBodyLimit)
	if err != nil {
		return err
	}
	email, err := body.str("email", fault.InvalidEmail)
	if err != nil {
		return err
	}
	role, err := body.str("role", fault.InvalidRole)
	if err != nil {
		return err
	}
	slug, err := body.str("workspace", fault.InvalidSlug)
	if err != nil {
		return err
	}
	password := ""
	if body.has("password") {
		if password, err = body.str("password", fault.InvalidPassword); err != nil {
			return err
		}
	}
	ws, ok := s.db.Workspace(slug)
	if !ok {
		return fault.Errorf(fault.NotFound, "no workspace %q", slug)
	}
	u, err := s.db.CreateUser(r.Context(), p.actor(), email, password, ws, role)
	if err != nil {
		return err
	}
	ans := createdUser{accountUser: accountUserOf(u), Workspace: ws.Slug, Role: role}
	if password == "" {
		link, err := s.passwordLink(r, p, u, setPasswordTTL)
		if err != nil {
			return err
		}
		ans.Link = link
	}
	writeJSON(w, http.StatusCreated, ans)
	return nil
}

// createPasswordLink takes {email} and answers a single-use reset link of
// that user (one hour): the operator's `tally user reset-password`. Admin
// token only, so an unknown email may say so (404).
//
// POST /v1/users/password-link
func (s *Server) createPasswordLink(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p, err := s.requireAdminToken(r)
	if err != nil {
		return err
	}
	body, err := decodeObject(w, r, authBodyLimit)
	if err != nil {
		return err
	}
	email, err := body.str("email", fault.InvalidEmail)
	if err != nil {
		return err
	}
	u, ok, err := s.db.UserByEmail(r.Context(), email)
	if err != nil {
		return err
	}
	if !ok {
		return fault.Errorf(fault.NotFound, "no user with this email")
	}
	link, err := s.passwordLink(r, p, u, resetLinkTTL)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, link)
	return nil
}

func (s *Server) passwordLink(r *http.Request, p principal, u *storage.User, ttl time.Duration) (*passwordLink, error) {
	token, err := s.db.CreatePasswordToken(r.Context(), p.actor(), u, ttl)
	if err != nil {
		return nil, err
	}
	return &passwordLink{Token: token, Path: passwordPath + token, ExpiresAt: storage.FormatTime(s.now().Add(ttl))}, nil
}
