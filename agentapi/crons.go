package agentapi

// cronRoutes registers the routes of this group.
func (s *Server) cronRoutes() {}
