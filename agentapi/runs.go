package agentapi

// runRoutes registers the routes of this group.
func (s *Server) runRoutes() {}
